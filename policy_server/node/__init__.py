"""Host effects: what the policy server changes on the node besides NRI's answers.

Owns the node-effect executor (``executor``: one executor per effect kind of the SDK's registry,
``cgroup_writer``, ``host_directories``, ``resctrl_groups``, and the shapes they share,
``execution``), where cgroup files are (``cgroup_layout``, ``cgroup_files``, ``cgroup_probe``)
and what containers' cgroups hold (``container_files``), resctrl groups (``resctrl_fs``), core
scheduling cookies (``coresched``), ``/proc`` writes (``procfs``), systemd unit properties
(``unit_properties``, ``systemd_bus``), the start-up probe of what can take effect
(``probe``) and the periodic node reconciler (``reconciler``). Every path has a
configurable root so tests use a fake tree.

Must not: answer HTTP, name a policy, or raise out of an apply/write call (failures are logged
and counted).
"""
