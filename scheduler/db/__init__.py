"""The scheduler's database: models, migrations and the query API.

Only the scheduler service uses it (compute agents never hold database
credentials); the rest of Berth goes through :mod:`scheduler.db.api`, which
deals in plain dicts.
"""
