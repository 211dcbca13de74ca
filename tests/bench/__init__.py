"""The benchmarks' own machinery and arithmetic, at tiny sizes."""
