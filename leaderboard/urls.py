from django.urls import path

from atrex_site.page_cache import shared_page

from . import about, compare_views, views

app_name = "leaderboard"

urlpatterns = [
    path("", shared_page(views.board), name="board"),
    path("leaderboard.<str:fmt>", shared_page(views.board_download), name="board-download"),
    path("operators/<slug:slug>/", shared_page(views.operator_detail), name="operator"),
    path("about/scores/", shared_page(about.about_scores), name="about-scores"),
    path("history/", shared_page(views.history), name="history"),
    path(
        "compare/",
        shared_page(compare_views.compare, personal=compare_views.reader_gets_their_own),
        name="compare",
    ),
    path("suites/<str:slug>/definition.json", views.suite_definition, name="suite-definition"),
    path("vendor/plotly.min.js", views.plotly_js, name="plotly-js"),
]
