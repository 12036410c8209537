"""CUDA C++ sources of the GPU engines, shipped as package data; installed as ``distprice.kernels`` and compiled
with CuPy (NVRTC) at run time by :mod:`distprice.lattice.gpu`, :mod:`distprice.lattice.gpu_risk`,
:mod:`distprice.montecarlo.gpu` and :mod:`distprice.models.heston_gpu`. The headers (``.cuh``) that say so are
host-compilable too, so that the tests check their arithmetic on any machine.

- ``common.cuh``: the precision (``-DREAL``), the tree's branching weights, the arrays every lattice kernel
  reads, the event cursor and where a follower finds its leader's forward pass;
- ``curve.cuh``: the zero curve, linear in t between knots and flat outside, ``P(0, t) = exp(-z(t) t)``;
- ``events.cuh``: a row's redemption, coupons and exercises as the backward pass applies them, forward-adjusted;
- ``adjust.cu``: the forward adjustment of every event's amount under one curve set, before the pricing kernels;
- ``outer.cu``: ``gpu-outer``, one instrument per thread, its rows in global memory, interleaved by warps;
- ``outer.cuh``: the forward pass and backward steps of one instrument per thread, shared with ``risk.cu``;
- ``flat.cu``: ``gpu-flat``, instruments bin-packed into blocks, both levels of parallelism flattened;
- ``wide.cu``: one block per tree, for trees too wide for a flat block;
- ``bumps.cuh``: a curve bump as the risk kernels apply it, to the alphas and to the events' amounts;
- ``risk.cu``: the risk engine's kernels, trees kept on the device and rolled back under many curve bumps;
- ``montecarlo.cu``: the Monte-Carlo pricer, one path per thread;
- ``montecarlo.cuh``: one Monte-Carlo path's arithmetic (Sobol, AS241, Brownian bridge, payoff);
- ``heston.cu``: the Heston calibration's kernels, the objective of a whole population per launch sequence;
- ``heston.cuh``: the Heston pricing arithmetic of ``heston.cu`` (a Black-Scholes control plus Gauss-Laguerre).
"""
