"""Console views: ``base`` (sign-in, org switcher, dashboard, feed), ``memory`` (browser, drawer,
graph, resonate) and ``admin`` (teams, members, agents and keys, audit)."""
