"""Host effects: what the policy server changes on the node besides NRI's answers.

Owns the cgroup executor (``cgroups``), resctrl groups (``resctrl_fs``), core scheduling cookies
(``coresched``), ``/proc`` writes (``procfs``), the start-up probe of what can take effect
(``probe``) and the periodic node reconciler (``reconciler``). Every path has a configurable
root so tests use a fake tree.

Must not: answer HTTP, or raise out of an apply/write call (failures are logged and counted).
"""
