class ASTSource:
    def __init__(self, fn, signature, constexprs):
        if list(signature) != list(fn.__code__.co_varnames[:fn.__code__.co_argcount]):
            raise TypeError("signature %s does not name %s's parameters" % (list(signature), fn.__name__))
        self.fn, self.signature, self.constexprs = fn, signature, constexprs
