#pragma once
// Every header of ooc_os (layer 1) includes this: compiled for a lower layer, or for a
// caller that must see include/ooc only (oocrun, the Python module), it stops the compile.
// CMakeLists.txt gives each layer its OOC_LAYER; a unit test of internals says OOC_LAYER=99.
#if !defined(OOC_LAYER) || OOC_LAYER < 1
#error "a header of ooc_os (layer 1) included from a lower layer, or from outside the library"
#endif
