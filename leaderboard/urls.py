from django.urls import path

from atrex_site.page_cache import cached_for_anonymous

from . import about, compare_views, views

app_name = "leaderboard"

urlpatterns = [
    path("", cached_for_anonymous(views.board), name="board"),
    path(
        "leaderboard.<str:fmt>", cached_for_anonymous(views.board_download), name="board-download"
    ),
    path("operators/<slug:slug>/", cached_for_anonymous(views.operator_detail), name="operator"),
    path("about/scores/", cached_for_anonymous(about.about_scores), name="about-scores"),
    path("history/", cached_for_anonymous(views.history), name="history"),
    path("compare/", compare_views.compare, name="compare"),
    path("suites/<str:slug>/definition.json", views.suite_definition, name="suite-definition"),
    path("vendor/plotly.min.js", views.plotly_js, name="plotly-js"),
]
