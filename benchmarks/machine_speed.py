"""How fast this machine runs Python today: one figure printed above every table of
``python -m benchmarks``, so that figures measured on different days can be told apart from
the code's changes. The machines here have run the same code at speeds three times apart
(see the performance guide, "Comparing figures of different days")."""

import timeit

#: The reference loop: pure interpreter work, no I/O, no allocation that grows.
LOOP = "sum(range(1000))"


def reference_us(repeat=5, number=2000):
    """Microseconds the reference loop takes: the best of ``repeat`` runs of ``number``."""
    return min(timeit.repeat(LOOP, number=number, repeat=repeat)) / number * 1e6
