__version__ = "fake"


def jit(fn=None, **kw):
    return fn if fn is not None else (lambda f: f)
