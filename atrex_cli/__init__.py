"""``atrex``: the Atrex-Bench Portal's command-line client (standard library only)."""
