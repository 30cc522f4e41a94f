"""The public REST API's shared parts: error bodies, pagination, tokens, schema hooks, URLs.

The resources themselves live with their apps (``leaderboard.api``, ``submissions.api``).
"""
