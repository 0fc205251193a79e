"""How ``fit`` weighs the recorded signals: the choices of its ``--weights``.

A module without imports, so that checking a pipeline file's ``calibration.fit.weights``
does not load MuJoCo's sysid, SciPy and matplotlib (``fit_cli``'s 3.4 s of imports).
"""

WEIGHTS = ('recording', 'fixed')
"""``recording``: after a fit, weigh velocity and effort errors by their typical size and
fit again (the default); ``fixed``: the fixed scales, one fit."""
