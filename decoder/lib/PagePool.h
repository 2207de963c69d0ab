//===- PagePool.h - Sequences and their KV pages: the host bookkeeping ----===//
//
// One pool of fixed-size KV pages shared by every sequence of a decoder,
// whichever backend stores them. A sequence owns a page-table row (its
// pages in position order) and its tokens. Pages are reference-counted so
// that a fork shares its source's full pages: appends only ever write a
// sequence's last, partial page, which a fork copies, so a shared page is
// never written again.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DECODER_LIB_PAGEPOOL_H
#define CONDENSATE_DECODER_LIB_PAGEPOOL_H

#include "condensate/Support/Status.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace condensate::decoder {

class PagePool {
public:
  using SeqId = int64_t;
  struct Sequence {
    bool live = false;
    std::vector<int32_t> pages;
    std::vector<int32_t> tokens;
  };

  PagePool(int64_t numPages, int64_t pageSize);

  int64_t numPages() const { return int64_t(refs_.size()); }
  int64_t freePages() const { return int64_t(free_.size()); }
  int64_t pagesFor(int64_t tokens) const {
    return (tokens + pageSize_ - 1) / pageSize_;
  }

  /// The live sequence `id`, or null.
  const Sequence *find(SeqId id) const;
  /// An error naming `id` unless it is live.
  Status check(SeqId id) const;
  /// Checks that every sequence in `ids` can grow by `extra` tokens:
  /// within `contextLength` (0: unbounded) and the free pages.
  Status checkGrowth(const SeqId *ids, int64_t count, int64_t extra,
                     int64_t contextLength) const;

  SeqId create();
  /// Appends `count` tokens to `id`, taking the pages they need (after
  /// checkGrowth said they exist).
  void append(SeqId id, const int32_t *tokens, int64_t count);
  /// A new sequence with `id`'s tokens: full pages shared (unless
  /// `shareFullPages` is false), the others copied to fresh ones through
  /// `copyPage(from, to)`.
  Result<SeqId> fork(SeqId id,
                     const std::function<Status(int32_t, int32_t)> &copyPage,
                     bool shareFullPages = true);
  Status release(SeqId id);

  /// `id`'s page-table row padded to `width` with its first page (the
  /// kernels read only positions below the length; the padding keeps every
  /// entry a valid page).
  void fillRow(SeqId id, int64_t width, int32_t *row) const;

private:
  int32_t take();
  void drop(int32_t page);

  int64_t pageSize_;
  std::vector<Sequence> seqs_;
  std::vector<int32_t> refs_; ///< per page: sequences holding it
  std::vector<int32_t> free_; ///< popped from the back
};

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_LIB_PAGEPOOL_H
