# Felix v1 codecs: see wire/wire.mk.
