from oslo_config import cfg


def register(conf, group, opts):
    """Register ``opts`` under a fresh copy of ``group`` in ``conf``.

    oslo.config keeps overrides on the OptGroup object it is given, so
    registering one module-level OptGroup in several ConfigOpts (tests,
    all-in-one) would let an override in one leak into the others.
    """
    conf.register_group(cfg.OptGroup(group.name, title=group.title, help=group.help))
    conf.register_opts(opts, group.name)


def register_module(conf, module):
    """Register the options of ``module``: its own ``register_opts(conf)`` when it has one
    (for more than its options), else the ``(group, opts)`` pairs of its ``list_opts()``."""
    if hasattr(module, "register_opts"):
        module.register_opts(conf)
        return
    for group, opts in module.list_opts():
        if isinstance(group, cfg.OptGroup):
            register(conf, group, opts)
        else:
            conf.register_opts(opts, group)
