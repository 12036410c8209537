"""CUDA C++ sources of the GPU engines (``outer.cu``, ``flat.cu``, ``common.cuh``), shipped as package data.

Installed as ``distprice.kernels``; :mod:`distprice.lattice.gpu` compiles them with CuPy at run time.
"""
