//===- PagePool.cpp - Sequences and their KV pages: the host bookkeeping --===//
#include "PagePool.h"

#include <algorithm>
#include <string>

namespace condensate::decoder {

PagePool::PagePool(int64_t numPages, int64_t pageSize)
    : pageSize_(pageSize), refs_(size_t(numPages), 0), free_(size_t(numPages)) {
  for (int64_t i = 0; i < numPages; ++i) // Page 0 is handed out first.
    free_[size_t(i)] = int32_t(numPages - 1 - i);
}

const PagePool::Sequence *PagePool::find(SeqId id) const {
  return id >= 0 && id < int64_t(seqs_.size()) && seqs_[size_t(id)].live
             ? &seqs_[size_t(id)]
             : nullptr;
}

Status PagePool::check(SeqId id) const {
  return find(id) ? Status::success()
                  : Status::error("sequence " + std::to_string(id) +
                                  " does not exist");
}

Status PagePool::checkGrowth(const SeqId *ids, int64_t count, int64_t extra,
                             int64_t contextLength) const {
  int64_t need = 0;
  for (int64_t i = 0; i < count; ++i) {
    const Sequence &s = seqs_[size_t(ids[i])];
    const int64_t newLen = int64_t(s.tokens.size()) + extra;
    if (contextLength > 0 && newLen > contextLength)
      return Status::error("sequence " + std::to_string(ids[i]) +
                           " would reach " + std::to_string(newLen) +
                           " tokens, past the model's context length " +
                           std::to_string(contextLength));
    need += std::max<int64_t>(0, pagesFor(newLen) - int64_t(s.pages.size()));
  }
  if (need > freePages())
    return Status::error("KV cache full: " + std::to_string(need) +
                         " more pages needed, " + std::to_string(freePages()) +
                         " of " + std::to_string(numPages()) +
                         " free (raise maxTokens)");
  return Status::success();
}

int32_t PagePool::take() {
  const int32_t page = free_.back();
  free_.pop_back();
  refs_[size_t(page)] = 1;
  return page;
}

void PagePool::drop(int32_t page) {
  if (--refs_[size_t(page)] == 0)
    free_.push_back(page);
}

PagePool::SeqId PagePool::create() {
  for (size_t i = 0; i < seqs_.size(); ++i)
    if (!seqs_[i].live) {
      seqs_[i] = Sequence();
      seqs_[i].live = true;
      return SeqId(i);
    }
  seqs_.emplace_back();
  seqs_.back().live = true;
  return SeqId(seqs_.size() - 1);
}

void PagePool::append(SeqId id, const int32_t *tokens, int64_t count) {
  Sequence &s = seqs_[size_t(id)];
  s.tokens.insert(s.tokens.end(), tokens, tokens + count);
  while (int64_t(s.pages.size()) < pagesFor(int64_t(s.tokens.size())))
    s.pages.push_back(take());
}

Result<PagePool::SeqId>
PagePool::fork(SeqId id,
               const std::function<Status(int32_t, int32_t)> &copyPage,
               bool shareFullPages) {
  CONDENSATE_RETURN_IF_ERROR(check(id).withContext("fork"));
  const int64_t len = int64_t(seqs_[size_t(id)].tokens.size());
  const int64_t shared = shareFullPages ? len / pageSize_ : 0;
  const int64_t need = int64_t(seqs_[size_t(id)].pages.size()) - shared;
  if (need > freePages())
    return Status::error("fork: KV cache full: " + std::to_string(need) +
                         " pages needed, " + std::to_string(freePages()) +
                         " free");
  const SeqId copy = create();
  // create() may have grown seqs_: take references only now.
  const Sequence &src = seqs_[size_t(id)];
  Sequence &dst = seqs_[size_t(copy)];
  dst.tokens = src.tokens;
  for (int64_t i = 0; i < shared; ++i) {
    dst.pages.push_back(src.pages[size_t(i)]);
    ++refs_[size_t(src.pages[size_t(i)])];
  }
  for (size_t i = size_t(shared); i < src.pages.size(); ++i) {
    dst.pages.push_back(take());
    Status st = copyPage(src.pages[i], dst.pages.back());
    if (!st.ok()) {
      (void)release(copy);
      return st.withContext("fork");
    }
  }
  return copy;
}

Status PagePool::release(SeqId id) {
  CONDENSATE_RETURN_IF_ERROR(check(id).withContext("release"));
  Sequence &s = seqs_[size_t(id)];
  // In reverse, so a sequence that grows again gets the same pages back.
  for (auto it = s.pages.rbegin(); it != s.pages.rend(); ++it)
    drop(*it);
  s = Sequence();
  return Status::success();
}

void PagePool::fillRow(SeqId id, int64_t width, int32_t *row) const {
  const Sequence &s = seqs_[size_t(id)];
  std::copy(s.pages.begin(), s.pages.end(), row);
  std::fill(row + s.pages.size(), row + width,
            s.pages.empty() ? 0 : s.pages[0]);
}

} // namespace condensate::decoder
