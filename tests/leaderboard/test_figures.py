from leaderboard.templatetags.figures import percent, sig


def test_small_scores_keep_their_significant_digits():
    assert sig(2.345e-5) == "2.35e-05"
    assert sig(0.40452) == "0.405"
    assert sig(7.4858) == "7.49"
    assert sig(0) == "0"
    assert sig(None) == "—"


def test_rates_read_as_percentages():
    assert percent(1.0) == "100%"
    assert percent(0.0) == "0%"
    assert percent(0.0123) == "1.2%"
    assert percent(0.5) == "50%"
    assert percent(None) == "—"
