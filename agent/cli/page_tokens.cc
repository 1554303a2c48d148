#include "agent/cli/page_tokens.h"

#include <algorithm>
#include <bit>
#include <utility>
#include <vector>

namespace kvwatch::agent {

const char* PageRuleName(PageRule rule) { return rule == PageRule::kFullPagesOnly ? "floor" : "ceil"; }

bool PagesFit(std::uint64_t tokens, std::uint64_t pages, std::uint64_t page_tokens, PageRule rule) {
  if (tokens == 0 || pages == 0 || page_tokens == 0) return false;
  const std::uint64_t full = tokens / page_tokens;
  if (rule == PageRule::kFullPagesOnly) return pages == full;
  return pages == full + (tokens % page_tokens != 0);
}

std::optional<PageTokensRange> FittingPageTokens(std::uint64_t tokens, std::uint64_t pages, PageRule rule) {
  if (tokens == 0 || pages == 0 || pages > tokens) return std::nullopt;
  const std::uint64_t L = tokens, n = pages;
  PageTokensRange r;
  if (rule == PageRule::kFullPagesOnly) {
    // floor(L / P) == n  <=>  L / (n + 1) < P <= L / n
    r = {L / (n + 1) + 1, L / n};
  } else {
    // ceil(L / P) == n  <=>  L / n <= P < L / (n - 1)
    r = {(L + n - 1) / n, n == 1 ? PageTokensRange::kUnbounded : (L + n - 2) / (n - 1) - 1};
  }
  if (r.lo > r.hi) return std::nullopt;
  return r;
}

namespace {

// The size the most records fit under one rule (see InferPageTokens), and how many.
std::optional<std::pair<std::uint64_t, std::uint64_t>> BestUnder(std::span<const TokenPages> records, PageRule rule) {
  // A sweep over the records' intervals: +1 where one starts, -1 after it ends.
  std::vector<std::pair<std::uint64_t, int>> events;
  for (const TokenPages& t : records) {
    const auto range = FittingPageTokens(t.tokens, t.pages, rule);
    if (!range || range->lo > kMaxPageTokens) continue;
    events.emplace_back(range->lo, +1);
    events.emplace_back(std::min(range->hi, kMaxPageTokens) + 1, -1);
  }
  if (events.empty()) return std::nullopt;
  std::sort(events.begin(), events.end());
  // Regions [at, end] of constant count, in order; keep those with the most.
  std::int64_t count = 0, best = 0;
  std::vector<PageTokensRange> best_regions;
  for (std::size_t i = 0; i < events.size();) {
    const std::uint64_t at = events[i].first;
    for (; i < events.size() && events[i].first == at; ++i) count += events[i].second;
    const std::uint64_t end = i < events.size() ? events[i].first - 1 : kMaxPageTokens;
    if (count <= 0 || count < best) continue;
    if (count > best) {
      best = count;
      best_regions.clear();
    }
    best_regions.push_back({at, end});
  }
  if (best_regions.empty()) return std::nullopt;
  std::uint64_t chosen = best_regions.front().lo;
  for (const PageTokensRange& region : best_regions) {
    const std::uint64_t pow2 = std::bit_ceil(region.lo);
    if (pow2 <= region.hi) {
      chosen = pow2;
      break;
    }
  }
  return std::pair{chosen, static_cast<std::uint64_t>(best)};
}

}  // namespace

std::optional<PageTokensGuess> InferPageTokens(std::span<const TokenPages> records) {
  std::uint64_t counted = 0;
  // A record whose pages would each hold more than kMaxPageTokens is no evidence.
  for (const TokenPages& t : records) counted += t.tokens > 0 && t.pages > 0 && t.tokens / t.pages <= kMaxPageTokens;
  if (counted == 0) return std::nullopt;
  std::optional<PageTokensGuess> guess;
  for (PageRule rule : {PageRule::kPartialLastPage, PageRule::kFullPagesOnly}) {
    const auto best = BestUnder(records, rule);
    if (!best) continue;
    const bool pow2 = std::has_single_bit(best->first);
    if (!guess || best->second > guess->fitting ||
        (best->second == guess->fitting && pow2 && !std::has_single_bit(guess->page_tokens))) {
      guess = PageTokensGuess{best->first, rule, counted, best->second};
    }
  }
  if (!guess || guess->fitting * 2 <= counted) return std::nullopt;
  return guess;
}

void PageTokensCheck::Add(std::uint64_t tokens, std::uint64_t pages) {
  if (tokens == 0 || pages == 0) return;
  ++records_;
  fit_[0] += PagesFit(tokens, pages, page_tokens_, PageRule::kPartialLastPage);
  fit_[1] += PagesFit(tokens, pages, page_tokens_, PageRule::kFullPagesOnly);
  if (other_) {
    other_fit_[0] += PagesFit(tokens, pages, *other_, PageRule::kPartialLastPage);
    other_fit_[1] += PagesFit(tokens, pages, *other_, PageRule::kFullPagesOnly);
  }
}

}  // namespace kvwatch::agent
