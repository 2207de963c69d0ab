//===- Status.h - forwards to condensate/Support/Status.h ------*- C++ -*-===//
// Kept while callers move to the new path.
#include "condensate/Support/Status.h"
