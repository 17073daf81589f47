from oslo_config import cfg

group = cfg.OptGroup("database", title="Database", help="The scheduler's SQL database.")

opts = [
    cfg.StrOpt(
        "connection",
        default="sqlite:///$state_path/berth.sqlite",
        secret=True,
        help="SQLAlchemy URL of the database, e.g. postgresql+psycopg2://berth:secret@db/berth "
        "or mysql+pymysql://berth:secret@db/berth. Only schedulers connect to it; "
        "compute agents never hold database credentials. Query arguments go to the "
        "driver, which is how TLS is set up: "
        "?sslmode=verify-full&sslrootcert=/etc/berth/db-ca.pem (PostgreSQL) or "
        "?ssl_ca=/etc/berth/db-ca.pem (PyMySQL). A PostgreSQL primary and its standbys are "
        "listed as libpq lists them, with the one that takes writes asked for: "
        "postgresql+psycopg2://berth:secret@db1:5432,db2:5432/berth?target_session_attrs=read-write.",
    ),
    cfg.BoolOpt(
        "auto_migrate",
        default=True,
        help="Upgrade the schema to the newest migration when the scheduler starts. "
        "Turn off to run 'berth-manage db sync' yourself.",
    ),
    cfg.IntOpt(
        "max_retries",
        default=10,
        min=-1,
        help="Attempts to reach the database at start and after a lost connection "
        "(-1 for ever).",
    ),
    cfg.FloatOpt(
        "retry_interval", default=1.0, min=0.0, help="Seconds between attempts to reach the database."
    ),
    cfg.BoolOpt("connection_debug", default=False, help="Log every SQL statement."),
]


def list_opts():
    return [(group, opts)]
