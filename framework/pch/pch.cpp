// Compiles the precompiled header once; see pch.h.
