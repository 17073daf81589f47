"""The placement policy: the host table, filters, weighers, selection, hints and
the plugin API. Pure: nothing here reads a database or a broker."""
