// Tokens per page from the records themselves. A trace that gives a request's
// prompt length (`input_length`) beside its pages (`hash_ids`) says how many
// tokens a page holds. A record with L tokens in n pages fits a page size P under
// one of two rules:
// - partial last page: n == ceil(L / P) (the Mooncake traces: 6,758 tokens in 14
//   pages of 512);
// - full pages only: n == floor(L / P) (engines that hash only full blocks: 71,175
//   tokens in 139 pages of 512).
// The last page is usually partial, so L / n is not the page size (6,758 / 14 is
// 483); the page size is the one most records fit, under the rule most records
// follow. A trace follows one rule, so the rules are never mixed within a count
// (mixed, they would let a record pick whichever fits, and 455..500 would all fit
// a 500-token trace).
//
// Pure functions and a value type (a PageTokensCheck belongs to one thread at a time).
#ifndef KVWATCH_AGENT_CLI_PAGE_TOKENS_H_
#define KVWATCH_AGENT_CLI_PAGE_TOKENS_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>

namespace kvwatch::agent {

enum class PageRule {
  kPartialLastPage,  // pages == ceil(tokens / page_tokens)
  kFullPagesOnly,    // pages == floor(tokens / page_tokens)
};
// "ceil" or "floor", as the JSON output names the rules.
const char* PageRuleName(PageRule rule);

// The largest page size inferred or accepted: far above any engine's block (vLLM
// and SGLang use 1 to 256 tokens, the Mooncake traces 512), low enough that a page
// and a block size fit 32 bits. A record that fits only larger sizes (an absurd
// input_length) does not vote and is not counted among the records.
inline constexpr std::uint64_t kMaxPageTokens = std::uint64_t{1} << 20;

// One record's evidence: its prompt tokens and its pages (both > 0 to count).
struct TokenPages {
  std::uint64_t tokens = 0;
  std::uint64_t pages = 0;
};

// Whether `pages` pages of `page_tokens` tokens hold `tokens` tokens under
// `rule`. False when any of the three is 0.
bool PagesFit(std::uint64_t tokens, std::uint64_t pages, std::uint64_t page_tokens, PageRule rule);

// The page sizes a record fits under a rule: one interval [lo, hi] (hi =
// kUnbounded for a single partial page: every size from the prompt's length up).
// nullopt when none (10 tokens in 9 pages fit no size) or tokens or pages is 0.
struct PageTokensRange {
  static constexpr std::uint64_t kUnbounded = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
};
std::optional<PageTokensRange> FittingPageTokens(std::uint64_t tokens, std::uint64_t pages, PageRule rule);

struct PageTokensGuess {
  std::uint64_t page_tokens = 0;
  PageRule rule = PageRule::kPartialLastPage;
  std::uint64_t records = 0;  // records with tokens and pages
  std::uint64_t fitting = 0;  // of those, fitting page_tokens under rule
};

// The page size most records fit: under each rule, of the sizes the largest
// number of records fit, the smallest power of two if one is among them (engines'
// block sizes are), else the smallest; then the rule with more fitting records
// (a tie: partial last page). nullopt when no record has tokens and pages, or when
// no size fits more than half of them (a mixed or inconsistent trace: no guess
// rather than a wrong one).
std::optional<PageTokensGuess> InferPageTokens(std::span<const TokenPages> records);

// Fit over a whole run, one record at a time: of the page size in use and of
// another one (the inferred size, when it differs), each under the rule that
// more records follow.
class PageTokensCheck {
 public:
  PageTokensCheck(std::uint64_t page_tokens, std::optional<std::uint64_t> other)
      : page_tokens_(page_tokens), other_(other) {}

  void Add(std::uint64_t tokens, std::uint64_t pages);
  std::uint64_t records() const { return records_; }
  std::uint64_t fitting() const { return std::max(fit_[0], fit_[1]); }
  PageRule rule() const { return fit_[1] > fit_[0] ? PageRule::kFullPagesOnly : PageRule::kPartialLastPage; }
  std::uint64_t other_fitting() const { return std::max(other_fit_[0], other_fit_[1]); }

 private:
  std::uint64_t page_tokens_;
  std::optional<std::uint64_t> other_;
  std::uint64_t records_ = 0;
  std::uint64_t fit_[2] = {0, 0};  // by rule: partial last page, full pages only
  std::uint64_t other_fit_[2] = {0, 0};
};

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_CLI_PAGE_TOKENS_H_
