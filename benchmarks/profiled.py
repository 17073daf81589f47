"""python -m benchmarks.profiled OUT MODULE [ARGS...]: run MODULE as __main__ under yappi
(CPU clock, every thread; BERTH_PROFILE_CLOCK=wall: wall clock, to see what a thread waits for)
and write its profile to OUT in pstats' format when it ends."""

import os
import runpy
import sys

import yappi


def main():
    out, module, *args = sys.argv[1:]
    sys.argv = [module, *args]
    yappi.set_clock_type(os.environ.get("BERTH_PROFILE_CLOCK", "cpu"))
    yappi.start()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        yappi.stop()
        yappi.get_func_stats().save(out, type="pstat")


if __name__ == "__main__":
    main()
