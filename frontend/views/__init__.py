"""Console views: ``base`` (sign-in, org switcher, dashboard, feed), ``memory`` (browser, drawer,
graph, resonate), ``assets`` (assets, versions and diffs, lifecycle, ACLs, bindings), ``governance``
(conflicts) and ``admin`` (teams, members, agents and keys, audit)."""
