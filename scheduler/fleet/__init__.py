"""What the scheduler knows of its hosts: their reports, what each agent holds
against the database, and builds that never finish."""
