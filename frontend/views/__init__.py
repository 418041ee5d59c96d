"""Console views: ``base`` (sign-in, org switcher, dashboard, feed), ``memory`` (browser, drawer,
graph, resonate), ``assets`` (assets, versions and diffs, lifecycle, ACLs, bindings), ``governance``
(conflicts), ``admin`` (teams, members and invitations, agents and keys, audit) and ``invitations``
(the invitee's ``/invite/<token>`` page)."""
