"""One module per op family: argument checks, the GPU call and the NumPy reference side by side."""
