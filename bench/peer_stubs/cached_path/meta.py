"""Stand-in: AllenNLP imports ``Meta`` but the benchmark never downloads anything."""


class Meta:
    pass
