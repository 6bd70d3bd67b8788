"""Code every service shares: config, database, blob storage, ids, auth, errors, telemetry.

Nothing here knows about one service's domain; services never import each other.
"""
