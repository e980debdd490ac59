# FSNP codecs: see wire/wire.mk.
