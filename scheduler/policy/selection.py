"""Placement, one instance at a time: candidates, filter, weigh, pick, consume.

Pure policy: it reads and updates a HostTable and nothing else, so that the
same code runs in the service, the tests, the benchmarks and simulations.

Filters and weighers that provide a vector form run over all candidate rows
at once; the others run host by host on what the vector filters left. With
``vectorized=False`` every plugin runs host by host: the plain reference the
vector forms are tested against.
"""

import random
from typing import NamedTuple

import numpy as np

from scheduler.exception import NoValidHost
from scheduler.policy import owned_hosts, ranked
from scheduler.policy import weighers as weighers_mod
from scheduler.policy.filters import BaseHostFilter


class Decision(NamedTuple):
    """How the host of one instance was chosen: what the scheduler logs of it."""

    considered: int  # candidates: known hosts less the disabled, the ignored, those not forced
    passed: int  # of them, those every filter passed (all of them when forced: no filter runs)
    forced: bool
    filters: tuple = ()  # with detail: (filter name, hosts left after it), in the order run
    top: tuple = ()  # with detail: (host, weight) of the heaviest hosts, heaviest first
    #: When the filters ran on some hosts only, those with the most of a column (ranked): how many,
    #: and the column; ``passed`` counts those of them that passed.
    looked: int | None = None
    ranked_by: str | None = None


#: How many of the heaviest hosts a detailed Decision names.
TOP_WEIGHTS = 3


class Selector:
    def __init__(self, filters, weighers, host_subset_size=1, rng=None, vectorized=True,
                 shuffle_best_same_weighed_hosts=False):
        self.filters = list(filters)
        self.weighers = list(weighers)
        # A weigher may ask for a wider random pick (``subset_size``): the largest request wins.
        self.host_subset_size = max([1, host_subset_size] + [w.subset_size for w in self.weighers])
        self.rng = rng or random.Random()
        self.vectorized = vectorized
        self.shuffle_best = shuffle_best_same_weighed_hosts
        by_vector = [f for f in self.filters if vectorized and f.filter_vector is not None]
        # Vector filters first, over the whole fleet; per-host ones on their survivors.
        self._filter_order = by_vector + [f for f in self.filters if f not in by_vector]
        self._vector_forms = [f.filter_vector for f in by_vector]
        self._limiting = [f for f in self.filters if _gives_limits(f)]
        self._tierers = [p for p in self.filters + self.weighers
                         if p.tier is not None or p.tier_vector is not None]
        # A weigher may confine the random pick to rows it names (``spread_rows``).
        self._spreader = next((w for w in self.weighers if w.spread_rows is not None), None)
        #: The live schedulers and the hosts this one owns among them (the service's
        #: ReportOwners: ``live`` and ``owns(host)``); None, or one live scheduler: no preference.
        self.owners = None
        self._owned_key = None
        self._owned = None
        # Whether a request's pick may be found among the hosts one column ranks first (ranked).
        self._may_rank = (vectorized and not self._tierers and self._spreader is None
                          and not shuffle_best_same_weighed_hosts)
        self._thresholds = ranked.Thresholds()
        self._every_row = {}  # fleet size -> np.arange of it, read-only: a table's rows

    def select(self, hosts, spec, decisions=None, detail=False, short=None, whole_fleet=False):
        """Choose and consume a host for each instance of ``spec``, all or none.

        ``hosts`` is a HostTable, or HostStates of one table. Returns one
        HostState per instance uuid, in order, each with the ``limits`` its
        agent must claim against; raises NoValidHost (with nothing consumed)
        when any instance finds no host. Given a list ``decisions``, appends
        a Decision per instance to it (none when NoValidHost is raised); with
        ``detail``, each says how many hosts each filter left and names the
        heaviest hosts, which costs a little more. With ``whole_fleet`` (a move), the hosts
        this scheduler owns are not preferred (scheduler.policy.owned_hosts).

        A request for as many as fit (``spec.min_instances``) is placed as far as
        hosts are found: fewer HostStates than instances are returned once at
        least ``spec.at_least`` are, and the NoValidHost that stopped it is
        appended to ``short`` (a list) when given.
        """
        table, rows = _table_and_rows(hosts, self._every_row)
        prefer_owned = not (whole_fleet or owned_hosts.spread_matters(spec, self.weighers))
        # Nobody asks for the weights themselves: where one column ranks the hosts, its order will do.
        ranker = None
        if self._may_rank and not detail and table is not None:
            ranker = ranked.ranking(self.weighers, table, spec)
        if (ranker is not None and table is hosts and len(rows) >= ranked.MIN_HOSTS
                and len(spec.instance_uuids) == 1 and not (spec.force_hosts or spec.force_nodes)
                and not (prefer_owned and self.owned(table) is not None)):
            # Nobody asks what each filter left: the filters need not run on every host.
            placed = self._select_ranked(table, rows, spec, decisions, ranker)
            if placed is not None:
                return placed
        rows, forced = candidates(table, rows, spec)
        considered = len(rows)
        recorded = None if decisions is None else len(decisions)
        scope = rows if forced or self._spreader is None else self.scope(table, rows, spec)
        owned = self.owned(table) if prefer_owned else None
        chosen = []
        try:
            for index, instance_uuid in enumerate(spec.instance_uuids):
                left = [] if detail and decisions is not None else None
                if not forced:
                    rows = self.filter(table, rows, spec, index, left)
                window = None
                if self._spreader is not None:
                    window = self._spreader.spread_rows(table, scope, spec, self.host_subset_size)
                if ranker is None:
                    weights = self.weigh(table, rows, spec)
                else:
                    weights = ranked.in_order(ranker[0], table, rows, spec)
                row = self.pick(rows, weights, self.tiers(table, rows, spec), window, owned)
                table.consume(row, instance_uuid, spec.flavor)
                chosen.append(row)
                if decisions is not None:
                    decisions.append(Decision(
                        considered, len(rows), forced, tuple(left or ()),
                        _heaviest(table, rows, weights) if left is not None else ()))
        except NoValidHost as exc:
            if len(chosen) < spec.at_least:
                for row, instance_uuid in zip(chosen, spec.instance_uuids, strict=False):
                    table.release(row, instance_uuid)
                if decisions is not None:
                    del decisions[recorded:]
                raise
            if short is not None:
                short.append(exc)
        placed = []
        for row in chosen:
            host = table.view(row)
            host.limits = {} if forced else self.limits(host)
            placed.append(host)
        return placed

    def _select_ranked(self, table, rows, spec, decisions, ranker):
        """select()'s answer for the one instance of ``spec`` on ``table`` (its ``rows``), neither
        forced nor weighed towards owned hosts, from the hosts that rank first by a column
        (scheduler.policy.ranked; ``ranker`` as ranked.ranking gives it), or None when it cannot be
        found that way. Given a list ``decisions``, appends the Decision: how many hosts were
        candidates, how many the filters ran on and how many of those passed."""
        picked = self._thresholds.pick(self, table, spec, *ranker)
        if picked is None:
            return None
        row, looked, passed = picked
        if decisions is not None:
            decisions.append(Decision(len(candidates(table, rows, spec)[0]), passed, False,
                                      looked=looked, ranked_by=ranker[0].ranks_by))
        table.consume(row, spec.instance_uuids[0], spec.flavor)
        host = table.view(row)
        host.limits = self.limits(host)
        return [host]

    def passing(self, table, rows, spec):
        """The rows of ``rows`` that pass every filter for a request's first instance (none left:
        an empty array, where filter() raises)."""
        for filter_vector in self._vector_forms:
            passed = filter_vector(table, rows, spec)
            if type(passed) is np.ndarray and passed.ndim:
                rows = rows[passed]
                if not len(rows):
                    return rows
            elif not passed:
                return rows[:0]
        for host_filter in self._filter_order[len(self._vector_forms):]:
            if not len(rows):
                break
            rows = np.fromiter(
                (r for r in rows if host_filter.host_passes(table.view(int(r)), spec)), dtype=np.intp
            )
        return rows

    def filter(self, table, rows, spec, index=0, left=None):
        """The rows that pass every filter; NoValidHost says how many each removed. Given a
        list ``left``, appends (filter name, rows left after it) to it for each filter run."""
        given = rows
        considered = len(rows)
        removed = []
        active = [f for f in self._filter_order
                  if not (f.run_filter_once_per_request and index > 0)]
        vector = [f for f in active if self.vectorized and f.filter_vector is not None]
        if vector:
            rows, after = _filter_vectors(vector, table, rows, spec)
            if not len(rows):
                raise _none_left(active, _removed(after, considered), table, given, spec, index)
            if left is not None:
                left.extend(after)
        for host_filter in active[len(vector):]:
            passed = np.fromiter(
                (r for r in rows if host_filter.host_passes(table.view(int(r)), spec)), dtype=np.intp
            )
            if len(passed) != len(rows):
                removed.append((host_filter.name, len(rows) - len(passed)))
            if left is not None:
                left.append((host_filter.name, len(passed)))
            rows = passed
            if not len(rows):
                raise _none_left(active, removed, table, given, spec, index)
        return rows

    def scope(self, table, rows, spec):
        """The rows that pass the filters run once per request: the hosts the request may use at all."""
        for host_filter in self._filter_order:
            if not host_filter.run_filter_once_per_request:
                continue
            if self.vectorized and host_filter.filter_vector is not None:
                passed = np.asarray(host_filter.filter_vector(table, rows, spec), dtype=bool)
                rows = rows[np.broadcast_to(passed, (len(rows),))]
            else:
                rows = np.fromiter(
                    (r for r in rows if host_filter.host_passes(table.view(int(r)), spec)), dtype=np.intp
                )
        return rows

    def weigh(self, table, rows, spec):
        """The total weight of each row of ``rows``."""
        totals = np.zeros(len(rows))
        views = None
        for weigher in self.weighers:
            if self.vectorized and weigher.weigh_vector is not None:
                raw = weigher.weigh_vector(table, rows, spec)
                if raw is None:
                    continue
                multipliers = weigher.multipliers(table, rows)
            else:
                views = views or table.views(rows)
                raw = [weigher.weigh(view, spec) for view in views]
                multipliers = np.array([weigher.weight_multiplier(view) for view in views])
            totals += multipliers * weighers_mod.normalize(raw, weigher.minval, weigher.maxval)
        return totals

    def tiers(self, table, rows, spec):
        """Each row's tier (0 best), or None when no plugin sorts hosts into tiers.

        Plugins that do are combined in order: the first plugin's tier
        decides, the next one breaks its ties, and so on.
        """
        combined = None
        for plugin in self._tierers:
            if self.vectorized and plugin.tier_vector is not None:
                tier = np.asarray(plugin.tier_vector(table, rows, spec), dtype=np.int64)
            else:
                tier = np.fromiter((plugin.tier(view, spec) for view in table.views(rows)),
                                   dtype=np.int64, count=len(rows))
            combined = tier if combined is None else combined * TIER_BASE + tier
        return combined

    def owned(self, table):
        """A mask over ``table``'s rows of the hosts this scheduler owns among the live ones, or
        None when it is the only one live (or is not told of the others)."""
        owners = self.owners
        if owners is None or len(owners.live) < 2:
            return None
        key = (owners.live, len(table))
        if key != self._owned_key:
            self._owned = np.fromiter((owners.owns(name) for name in table.names[:len(table)]),
                                      dtype=bool, count=len(table))
            self._owned_key = key
        return self._owned

    def pick(self, rows, weights, tiers=None, window=None, owned=None):
        """A row at random among the ``host_subset_size`` heaviest of the best tier.

        With ``owned`` (a mask over the table's rows: the hosts this scheduler owns among
        the N live ones), among the hosts it owns when any passed and the fleet is large
        enough (owned_hosts.narrow): N schedulers deciding at once then choose
        different hosts instead of racing for the same heaviest ones (their claims
        conflicting). A lone scheduler picks as before.

        With a ``window`` (rows a weigher names, see ``spread_rows``), at
        random among the best tier's rows in the window, or the heaviest of
        the best tier when none is. Ties in weight go to the earlier rows, as
        a stable sort would; with ``shuffle_best_same_weighed_hosts``, when
        more hosts share the best weight than the subset holds, at random
        among all of them (as Nova shuffles them before taking the subset).
        """
        if not len(rows):
            raise NoValidHost("No valid host was found: no candidate hosts")
        if tiers is not None and len(rows) > 1:
            in_best = tiers == tiers.min()
            rows, weights = rows[in_best], weights[in_best]
        size = self.host_subset_size
        if window is not None:
            inside = np.isin(rows, window)
            if inside.any():
                rows, weights = rows[inside], weights[inside]
            else:
                size = 1
        if owned is not None and window is None:
            rows, weights = owned_hosts.narrow(rows, weights, owned, len(self.owners.live), size)
        if self.shuffle_best and len(rows) > size:
            tied = np.flatnonzero(weights == weights.max())
            if len(tied) > size:
                return int(rows[tied[self.rng.randrange(len(tied))]])
        best = rows[top(weights, size)]
        return int(best[self.rng.randrange(len(best))]) if len(best) > 1 else int(best[0])

    def limits(self, host):
        merged = {}
        for host_filter in self._limiting:
            merged.update(host_filter.limits(host))
        return merged


#: Tiers a plugin may use (0 .. TIER_BASE - 1) when several plugins sort hosts into tiers.
TIER_BASE = 16


#: Once fewer than this share of the rows are left, the next vector filters read only those
#: rows (gathered) rather than every row (in place, a slice): both give the same answers.
NARROW_BELOW = 0.125


def _gives_limits(host_filter):
    """Whether ``host_filter`` has limits of its own (BaseHostFilter's are none: {})."""
    own = "limits" in getattr(host_filter, "__dict__", {})
    return own or getattr(type(host_filter), "limits", None) is not BaseHostFilter.limits


def _filter_vectors(vector_filters, table, rows, spec):
    """(the rows of ``rows`` that pass every filter of ``vector_filters``, [(filter name, hosts
    left after it)]), the filters applied in order."""
    considered = len(rows)
    # Over most of the fleet a slice reads the columns in place instead of gathering them, the
    # hosts left out (disabled, ignored) kept out by the mask: ``rows`` are ascending, as
    # candidates() and the filters leave them, and so are the rows this returns.
    mask = kept = None
    if considered == len(table) and (not considered or rows[-1] == considered - 1):
        mask = np.ones(considered, dtype=bool)
    elif considered * 2 >= len(table):
        mask = np.zeros(len(table), dtype=bool)
        mask[rows] = True
    else:
        kept = rows
    left, count = [], considered
    for host_filter in vector_filters:
        passed = host_filter.filter_vector(table, slice(None) if kept is None else kept, spec)
        if passed is not True:  # True: the filter had nothing to check for this request
            if kept is None:
                mask &= passed
                count = int(np.count_nonzero(mask))
                if count < NARROW_BELOW * considered:
                    kept = np.flatnonzero(mask)
            else:
                kept = (kept if passed else kept[:0]) if np.ndim(passed) == 0 else kept[passed]
                count = len(kept)
        left.append((host_filter.name, count))
    return (np.flatnonzero(mask) if kept is None else kept), left


def _removed(left, considered):
    """[(filter name, hosts it removed)] of [(filter name, hosts left after it)]."""
    removed = []
    count = considered
    for name, now in left:
        if now != count:
            removed.append((name, count - now))
        count = now
    return removed


def _none_left(active, removed, table, rows, spec, index):
    """The NoValidHost of a request no host of ``rows`` passed: how many each filter removed, and what
    the filters of ``active`` that can say more say of them."""
    notes = _why_removed(active, removed, table, rows, spec)
    return NoValidHost(no_valid_host_reason(len(rows), removed, spec, index, notes), removed)


def _why_removed(active, removed, table, rows, spec):
    """{filter name: what its why_removed says} of the filters of ``removed`` that say something."""
    notes = {}
    names = {name for name, _ in removed}
    for host_filter in active:
        if host_filter.name in names and host_filter.why_removed is not None:
            note = host_filter.why_removed(table, rows, spec)
            if note:
                notes[host_filter.name] = note
    return notes


def _heaviest(table, rows, weights, k=TOP_WEIGHTS):
    """((host, weight), ...) of the ``k`` heaviest of ``rows``, heaviest first."""
    return tuple((table.names[int(rows[i])], float(weights[i])) for i in top(weights, min(k, len(rows))))


def top(weights, k):
    """Indices of the ``k`` largest weights, heaviest first, as a stable sort would give."""
    n = len(weights)
    if k == 1:
        return np.array([int(np.argmax(weights))])
    if k >= n:
        return np.argsort(-weights, kind="stable")
    kth = np.partition(weights, n - k)[n - k]
    above = np.flatnonzero(weights > kth)
    tied = np.flatnonzero(weights == kth)[: k - len(above)]
    picked = np.concatenate([above, tied])
    return picked[np.argsort(-weights[picked], kind="stable")]


def _table_and_rows(hosts, every_row=None):
    """(the HostTable, the rows) of ``hosts``, a table or HostStates of one. ``every_row``: a dict
    that keeps each fleet size's rows, which are read-only."""
    if hasattr(hosts, "COLUMNS"):
        if every_row is None:
            return hosts, np.arange(len(hosts), dtype=np.intp)
        rows = every_row.get(len(hosts))
        if rows is None:
            every_row.clear()
            rows = every_row[len(hosts)] = np.arange(len(hosts), dtype=np.intp)
            rows.flags.writeable = False
        return hosts, rows
    hosts = list(hosts)
    if not hosts:
        return None, np.empty(0, dtype=np.intp)
    table = hosts[0].table
    if any(h.table is not table for h in hosts):
        raise ValueError("select() needs HostStates of one HostTable")
    return table, np.array([h.row for h in hosts], dtype=np.intp)


def candidates(table, rows, spec):
    """Leave out disabled hosts, apply ignore_hosts, then force_hosts / force_nodes; returns
    (rows, forced). A host an operator disabled takes nothing, whatever the filters."""
    if not len(rows):
        raise NoValidHost("No valid host was found: no compute host has reported to the scheduler")
    disabled = table.disabled[rows] if table.disabled.any() else None
    if disabled is not None and disabled.any():
        forced = set(spec.force_hosts) | set(spec.force_nodes)
        refused = forced and sorted(forced & {table.names[r] for r in rows[disabled]})
        if refused:
            raise NoValidHost(f"No valid host was found: forced host {', '.join(refused)} is disabled "
                              "(berth host list says why)")
        rows = rows[~disabled]
        if not len(rows):
            raise NoValidHost("No valid host was found: every compute host is disabled (berth host list "
                              "says why)")
    if spec.ignore_hosts:
        ignored = [table.index[h] for h in spec.ignore_hosts if h in table.index]
        if len(ignored) == 1:  # a move's own host, a build's first failure: no set to build
            rows = rows[rows != ignored[0]]
        elif ignored:
            rows = rows[~np.isin(rows, ignored)]
    if not (spec.force_hosts or spec.force_nodes):
        return rows, False
    forced_hosts, forced_nodes = set(spec.force_hosts), set(spec.force_nodes)
    rows = np.array(
        [r for r in rows
         if (not forced_hosts or table.names[r] in forced_hosts)
         and (not forced_nodes or table.nodenames[r] in forced_nodes)],
        dtype=np.intp,
    )
    if not len(rows):
        wanted = ", ".join(sorted(forced_hosts | forced_nodes))
        raise NoValidHost(f"No valid host was found: forced host {wanted} is not a known host")
    return rows, True


def no_valid_host_reason(considered, removed, spec, index, notes=None):
    if not considered:
        return "No valid host was found: every known host was ignored or excluded"
    notes = notes or {}
    detail = ", ".join(f"{name} removed {count}" + (f" ({notes[name]})" if name in notes else "")
                       for name, count in removed)
    hosts = f"{considered} host{'s' if considered != 1 else ''}"
    if index == 0:
        which = f" for instance 1 of {spec.num_instances}" if spec.num_instances > 1 else ""
        fewer = f" (none fit; at least {spec.at_least} asked)" if spec.min_instances is not None else ""
        return f"No valid host was found{which}: {hosts} considered; {detail}; none left{fewer}"
    # A later instance of the request is placed among the hosts that passed for the one before.
    found = (f"No valid host was found for instance {index + 1} of {spec.num_instances}: of the {hosts} "
             f"that passed the filters for instance {index}, {detail}; none left")
    fit = f"none booted: {index} of {spec.num_instances} fit"
    if spec.min_instances is None:
        return f"{found} ({fit}, and a request is placed whole or not at all)"
    if index < spec.at_least:
        return f"{found} ({fit}, fewer than the {spec.at_least} asked for at least)"
    return found  # the first instance that does not fit: those before it are booted
