//===- Engine.h - forwards to the compiler library's headers ---*- C++ -*-===//
// Kept while callers move to condensate/Compiler/{CPUProgram,Compiler}.h.
#include "condensate/Compiler/CPUProgram.h"
#include "condensate/Compiler/Compiler.h"
