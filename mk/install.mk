# SPDX-License-Identifier: MIT
# make install / make uninstall (owner: tools):
#   make install [PREFIX=/usr/local] [DESTDIR=]
#        $(PREFIX)/bin/kvtier                            the command
#        $(PREFIX)/lib/kvtier/libkvtier.so               the preload library: where
#                                                        `kvtier run` looks for it
#                                                        (../lib/kvtier/ from the
#                                                        command; tools/cmd_run.c)
#        $(PREFIX)/share/man/man1/kvtier.1               the man page
#        $(PREFIX)/share/bash-completion/completions/kvtier  bash completion
#   make uninstall [PREFIX=...] [DESTDIR=...]   removes those four files (and the
#        lib/kvtier folder when it is left empty)
# install depends on the built files: it builds them when they are missing or
# out of date, and copies them as they are otherwise (make -o FILE: never
# rebuilt). DESTDIR stages the tree elsewhere (packages, tests); the layout
# under it is the one `kvtier run` expects, so a staged copy runs as installed.
PREFIX  ?= /usr/local
DESTDIR ?=
INSTALL ?= install

KVT_INSTALL_BIN  := $(DESTDIR)$(PREFIX)/bin
KVT_INSTALL_LIB  := $(DESTDIR)$(PREFIX)/lib/kvtier
KVT_INSTALL_MAN  := $(DESTDIR)$(PREFIX)/share/man/man1
KVT_INSTALL_COMP := $(DESTDIR)$(PREFIX)/share/bash-completion/completions

.PHONY: install uninstall
install: $(KVTIER) $(LIBKVTIER) docs/kvtier.1 tools/kvtier.bash-completion
	$(INSTALL) -d $(KVT_INSTALL_BIN) $(KVT_INSTALL_LIB) $(KVT_INSTALL_MAN) $(KVT_INSTALL_COMP)
	$(INSTALL) -m 755 $(KVTIER) $(KVT_INSTALL_BIN)/kvtier
	$(INSTALL) -m 755 $(LIBKVTIER) $(KVT_INSTALL_LIB)/libkvtier.so
	$(INSTALL) -m 644 docs/kvtier.1 $(KVT_INSTALL_MAN)/kvtier.1
	$(INSTALL) -m 644 tools/kvtier.bash-completion $(KVT_INSTALL_COMP)/kvtier

uninstall:
	rm -f $(KVT_INSTALL_BIN)/kvtier $(KVT_INSTALL_LIB)/libkvtier.so \
		$(KVT_INSTALL_MAN)/kvtier.1 $(KVT_INSTALL_COMP)/kvtier
	rmdir $(KVT_INSTALL_LIB) 2>/dev/null || true
