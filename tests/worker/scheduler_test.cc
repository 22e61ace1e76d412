// The scheduler on hand-made sequences: decoders get their token every step, prefills (recomputes
// included) take what is left in chunks that fit, and nothing is preempted and readmitted in one step.
#include "worker/engine/scheduler.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/byte_tokenizer.h"
#include "tests/support/catch.h"

namespace llmc::engine {
namespace {

class SchedulerFixture {
 public:
  SchedulerFixture(int32_t num_blocks, SchedulerLimits limits, BlockHashFunction hash = BlockHash)
      : tokenizer_(testing::MakeByteTokenizer()), allocator_(num_blocks), scheduler_(allocator_, limits, hash) {}

  // A request with one choice, the prompt `prompt` and the cache salt `salt`, queued with the scheduler.
  Sequence* AddPrompt(uint64_t id, std::vector<int32_t> prompt, std::string salt = "") {
    auto group = std::make_unique<RequestGroup>();
    group->id = id;
    group->request.prompt_token_ids = std::move(prompt);
    group->request.sampling.max_tokens = 64;
    group->request.cache_salt = std::move(salt);
    group->sequences.push_back(std::make_unique<Sequence>(*group, 0, *tokenizer_));
    Sequence* sequence = group->sequences.back().get();
    scheduler_.AddWaiting(sequence);
    groups_.push_back(std::move(group));
    return sequence;
  }

  // A request with one choice whose prompt is `prompt_length` tokens, queued with the scheduler.
  Sequence* Add(uint64_t id, int64_t prompt_length) { return AddGroup(id, prompt_length, 1, std::nullopt).front(); }

  // A request with `n` choices, asking for prompt logprobs when `prompt_logprobs` is set.
  std::vector<Sequence*> AddGroup(uint64_t id, int64_t prompt_length, uint32_t n,
                                  std::optional<uint32_t> prompt_logprobs) {
    auto group = std::make_unique<RequestGroup>();
    group->id = id;
    group->request.prompt_token_ids.assign(prompt_length, 'a');
    group->request.sampling.max_tokens = 64;
    group->request.sampling.n = n;
    group->request.sampling.prompt_logprobs = prompt_logprobs;
    std::vector<Sequence*> sequences;
    for (uint32_t i = 0; i < n; ++i) {
      group->sequences.push_back(std::make_unique<Sequence>(*group, i, *tokenizer_));
      sequences.push_back(group->sequences.back().get());
      scheduler_.AddWaiting(sequences.back());
    }
    groups_.push_back(std::move(group));
    return sequences;
  }

  // Schedules a step, then does what the engine does after a successful one: the chunks count as computed
  // and each sampling chunk appends a token.
  SchedulerOutput Step() {
    SchedulerOutput plan = scheduler_.Schedule();
    scheduler_.Computed(plan);
    for (const ScheduledChunk& chunk : plan.chunks) {
      if (chunk.samples) chunk.sequence->tokens.push_back('b');
    }
    return plan;
  }

  Scheduler& scheduler() { return scheduler_; }
  BlockAllocator& allocator() { return allocator_; }

 private:
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  BlockAllocator allocator_;
  Scheduler scheduler_;
  std::vector<std::unique_ptr<RequestGroup>> groups_;
};

int64_t TokensFor(const SchedulerOutput& plan, const Sequence* sequence) {
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (chunk.sequence == sequence) return chunk.num_tokens;
  }
  return 0;
}

TEST_CASE("scheduler: an older sequence recomputing in chunks never takes the running decoders' tokens",
          "[unit][engine]") {
  SchedulerFixture fixture(/*num_blocks=*/64, {/*block_size=*/4, /*max_num_batched_tokens=*/8, /*max_running=*/4});
  // b and c decode; a (an older request, as after a preemption) then needs 40 tokens recomputed.
  Sequence* b = fixture.Add(2, 3);
  Sequence* c = fixture.Add(3, 3);
  fixture.Step();
  REQUIRE(b->decoding());
  REQUIRE(c->decoding());
  Sequence* a = fixture.Add(1, 40);
  for (int step = 0; step < 8 && !a->decoding(); ++step) {
    const int64_t left = a->num_uncomputed();
    const SchedulerOutput plan = fixture.Step();
    INFO("step " << step);
    CHECK(TokensFor(plan, b) == 1);
    CHECK(TokensFor(plan, c) == 1);
    CHECK(TokensFor(plan, a) == std::min<int64_t>(6, left));
    CHECK(plan.num_decode_tokens == 2);
  }
  CHECK(a->decoding());
}

TEST_CASE("scheduler: a prefill short of blocks takes the chunk that fits instead of preempting itself",
          "[unit][engine]") {
  // 5 blocks of 4 tokens; d decodes in one block, s prefills 30 tokens and, after its first chunk of 10,
  // finds 1 free block where 3 would take the whole budget.
  SchedulerFixture fixture(/*num_blocks=*/5, {/*block_size=*/4, /*max_num_batched_tokens=*/12, /*max_running=*/4});
  Sequence* d = fixture.Add(1, 2);
  Sequence* s = fixture.Add(2, 30);
  const SchedulerOutput first = fixture.Step();
  REQUIRE(TokensFor(first, d) == 2);
  REQUIRE(TokensFor(first, s) == 10);
  REQUIRE(fixture.allocator().num_free() == 1);

  const SchedulerOutput second = fixture.scheduler().Schedule();
  CHECK(second.preempted.empty());
  CHECK(TokensFor(second, d) == 1);
  CHECK(TokensFor(second, s) == 6);  // its 3 blocks hold 2 more tokens, the free one 4
  CHECK(s->num_computed == 10);      // kept: not recomputed from the start
}

TEST_CASE("scheduler: a prefill leaves free the block a decoder needs for its next token", "[unit][engine]") {
  // 5 blocks of 4 tokens. After the first step d (3 prompt tokens) will need a second block for its token
  // after next; s (30 tokens) holds three blocks and one is free.
  SchedulerFixture fixture(/*num_blocks=*/5, {/*block_size=*/4, /*max_num_batched_tokens=*/12, /*max_running=*/4});
  Sequence* d = fixture.Add(1, 3);
  Sequence* s = fixture.Add(2, 30);
  fixture.Step();
  REQUIRE(s->num_computed == 9);
  REQUIRE(fixture.allocator().num_free() == 1);

  const SchedulerOutput second = fixture.Step();
  CHECK(TokensFor(second, d) == 1);
  CHECK(TokensFor(second, s) == 3);  // what its own blocks hold, not the free one
  CHECK(fixture.allocator().num_free() == 1);
  const SchedulerOutput third = fixture.Step();
  CHECK(third.preempted.empty());
  CHECK(TokensFor(third, d) == 1);
}

TEST_CASE("scheduler: a decoder short of a block preempts the newest, which is not readmitted in that step",
          "[unit][engine]") {
  // 4 blocks of 4 tokens. Three sequences of 4-token prompts fill three blocks; one is left. After the
  // first step each needs a second block for its next token: the oldest gets the free one, the second
  // takes the newest's.
  SchedulerFixture fixture(/*num_blocks=*/4, {/*block_size=*/4, /*max_num_batched_tokens=*/16, /*max_running=*/4});
  Sequence* first = fixture.Add(1, 4);
  Sequence* second = fixture.Add(2, 4);
  Sequence* newest = fixture.Add(3, 4);
  fixture.Step();
  REQUIRE(fixture.allocator().num_free() == 1);

  const SchedulerOutput plan = fixture.Step();
  CHECK(TokensFor(plan, first) == 1);
  CHECK(TokensFor(plan, second) == 1);
  CHECK(TokensFor(plan, newest) == 0);
  REQUIRE(plan.preempted.size() == 1);
  CHECK(plan.preempted[0] == newest);
  CHECK(newest->num_computed == 0);
  CHECK(fixture.scheduler().num_waiting() == 1);
  CHECK(fixture.scheduler().num_running() == 2);
}

TEST_CASE("scheduler: a preempted sequence resumes before requests that arrived after it", "[unit][engine]") {
  SchedulerFixture fixture(/*num_blocks=*/4, {/*block_size=*/4, /*max_num_batched_tokens=*/16, /*max_running=*/4});
  Sequence* first = fixture.Add(1, 4);
  fixture.Add(2, 4);
  Sequence* preempted = fixture.Add(3, 4);
  fixture.Step();
  Sequence* later = fixture.Add(4, 2);
  const SchedulerOutput plan = fixture.Step();
  REQUIRE(plan.preempted.size() == 1);
  REQUIRE(plan.preempted[0] == preempted);
  CHECK(TokensFor(plan, later) == 0);  // no admissions in a step that had to preempt

  fixture.scheduler().Remove(first);  // finished: its two blocks are free
  const SchedulerOutput resumed = fixture.Step();
  CHECK(TokensFor(resumed, preempted) == 5);  // its prompt and its one output token, recomputed
  CHECK(TokensFor(resumed, later) == 0);      // no block left for it
}

TEST_CASE("scheduler: prompt logprob rows are capped per step and the other choices wait for choice 0",
          "[unit][engine]") {
  SchedulerFixture fixture(/*num_blocks=*/256, {/*block_size=*/16, /*max_num_batched_tokens=*/512,
                                                /*max_running=*/8});
  const std::vector<Sequence*> scored = fixture.AddGroup(1, 300, /*n=*/2, /*prompt_logprobs=*/1);
  const std::vector<Sequence*> second = fixture.AddGroup(2, 40, 1, 0);
  Sequence* plain = fixture.Add(3, 50);

  // Choice 0 takes every row of the step; the second request has none left; the plain one is unaffected;
  // choice 1 waits.
  SchedulerOutput plan = fixture.Step();
  CHECK(TokensFor(plan, scored[0]) == kMaxPromptLogprobRowsPerStep);
  CHECK(TokensFor(plan, scored[1]) == 0);
  CHECK(TokensFor(plan, second[0]) == 0);
  CHECK(TokensFor(plan, plain) == 50);

  plan = fixture.Step();
  CHECK(TokensFor(plan, scored[0]) == kMaxPromptLogprobRowsPerStep);
  CHECK(TokensFor(plan, scored[1]) == 0);
  CHECK(TokensFor(plan, second[0]) == 0);

  // 44 tokens are left, of which the last needs no row: the second request gets the other 85 rows and,
  // its prompt having 39 rows, all 40 tokens.
  plan = fixture.Step();
  CHECK(TokensFor(plan, scored[0]) == 44);
  CHECK(TokensFor(plan, second[0]) == 40);
  CHECK(TokensFor(plan, scored[1]) == 0);
  REQUIRE(scored[0]->num_output() == 1);
  CHECK_FALSE(scored[0]->collects_prompt_logprobs());

  // Choice 0 has its first token (and sent the prompt logprobs): choice 1 prefills in one chunk.
  plan = fixture.Step();
  CHECK(TokensFor(plan, scored[0]) == 1);
  CHECK(TokensFor(plan, scored[1]) == 300);
}

TEST_CASE("scheduler: with prefix caching a repeated prompt starts after its cached full blocks", "[unit][engine]") {
  SchedulerFixture fixture(/*num_blocks=*/64, {/*block_size=*/4, /*max_num_batched_tokens=*/64, /*max_running=*/8,
                                               /*enable_prefix_caching=*/true});
  Sequence* cold = fixture.AddGroup(1, 18, 1, std::nullopt).front();
  SchedulerOutput plan = fixture.Step();
  CHECK(TokensFor(plan, cold) == 18);
  CHECK(plan.prefix_cache_queries == 18);
  CHECK(plan.prefix_cache_hits == 0);

  // The same 18 tokens: 4 full blocks (16 tokens) are cached; the last 2 tokens are computed.
  Sequence* warm = fixture.AddGroup(2, 18, 1, std::nullopt).front();
  plan = fixture.Step();
  CHECK(TokensFor(plan, warm) == 2);
  CHECK(plan.prefix_cache_hits == 16);
  CHECK(warm->num_cached_prompt_tokens == 16);
  for (int k = 0; k < 4; ++k) CHECK(warm->block_table[k] == cold->block_table[k]);
  CHECK(warm->block_table[4] != cold->block_table[4]);

  // A prompt of exactly 4 blocks still computes its last token; its third block is not the same.
  Sequence* exact = fixture.Add(3, 16);
  exact->tokens[9] = 'z';
  plan = fixture.Step();
  CHECK(TokensFor(plan, exact) == 16 - 8);
  CHECK(exact->num_cached_prompt_tokens == 8);

  // Preempting a sharer leaves the blocks to the other holder; readmitted, it finds them again.
  const int32_t free_before = fixture.allocator().num_free();
  fixture.scheduler().Remove(warm);
  CHECK(fixture.allocator().num_free() == free_before + 1);  // only its private block
}

TEST_CASE("scheduler: with prefix caching only requests with the same cache salt share blocks", "[unit][engine]") {
  SchedulerFixture fixture(/*num_blocks=*/64, {/*block_size=*/4, /*max_num_batched_tokens=*/64, /*max_running=*/8,
                                               /*enable_prefix_caching=*/true});
  const std::vector<int32_t> prompt(18, 'a');
  Sequence* alice = fixture.AddPrompt(1, prompt, "alice");
  fixture.Step();
  // Another salt and no salt: nothing cached for them.
  Sequence* bob = fixture.AddPrompt(2, prompt, "bob");
  Sequence* unsalted = fixture.AddPrompt(3, prompt);
  SchedulerOutput plan = fixture.Step();
  CHECK(TokensFor(plan, bob) == 18);
  CHECK(TokensFor(plan, unsalted) == 18);
  CHECK(bob->num_cached_prompt_tokens == 0);
  CHECK(unsalted->num_cached_prompt_tokens == 0);
  // The same salt: the 4 full blocks alice computed.
  Sequence* alice_again = fixture.AddPrompt(4, prompt, "alice");
  plan = fixture.Step();
  CHECK(TokensFor(plan, alice_again) == 2);
  CHECK(alice_again->num_cached_prompt_tokens == 16);
  for (int k = 0; k < 4; ++k) CHECK(alice_again->block_table[k] == alice->block_table[k]);
}

TEST_CASE("scheduler: with prefix caching a hash collision never gives a prompt another prompt's blocks",
          "[unit][engine]") {
  // Every block hashes alike: each lookup has a candidate, and only its identity tells it apart.
  SchedulerFixture fixture(
      /*num_blocks=*/64,
      {/*block_size=*/4, /*max_num_batched_tokens=*/64, /*max_running=*/8, /*enable_prefix_caching=*/true},
      [](uint64_t, absl::Span<const int32_t>) -> uint64_t { return 7; });
  Sequence* victim = fixture.AddPrompt(1, std::vector<int32_t>(9, 'a'));
  fixture.Step();
  CHECK(fixture.allocator().num_cached() == 1);  // the first block; the second collides with it
  std::vector<int32_t> other(9, 'a');
  other[0] = 'b';
  Sequence* prober = fixture.AddPrompt(2, other);
  Sequence* salted = fixture.AddPrompt(3, std::vector<int32_t>(9, 'a'), "tenant");
  SchedulerOutput plan = fixture.Step();
  CHECK(TokensFor(plan, prober) == 9);
  CHECK(TokensFor(plan, salted) == 9);
  CHECK(prober->block_table[0] != victim->block_table[0]);
  CHECK(salted->block_table[0] != victim->block_table[0]);
  // The same prompt still finds what is cached of it.
  Sequence* again = fixture.AddPrompt(4, std::vector<int32_t>(9, 'a'));
  plan = fixture.Step();
  CHECK(again->num_cached_prompt_tokens == 4);
  CHECK(again->block_table[0] == victim->block_table[0]);
}

TEST_CASE("scheduler: with prefix caching a block cached after an evicted parent is never found after a colliding one",
          "[unit][engine]") {
  // The first blocks "aaaa" and "bbbb" collide (crafted); every other hash is the real chain. Before blocks
  // were chained by identity, a hit compared only the parent's hash, so the victim's second block, cached
  // after "aaaa", was served after "bbbb" once "aaaa" had been evicted and "bbbb" cached in its place.
  SchedulerFixture fixture(
      /*num_blocks=*/16,
      {/*block_size=*/4, /*max_num_batched_tokens=*/64, /*max_running=*/8, /*enable_prefix_caching=*/true},
      [](uint64_t parent, absl::Span<const int32_t> tokens) -> uint64_t {
        return tokens[0] == 'a' || tokens[0] == 'b' ? 7 : BlockHash(parent, tokens);
      });
  const auto prompt = [](char head, char middle) {
    std::vector<int32_t> tokens(4, head);
    tokens.insert(tokens.end(), 4, middle);
    tokens.push_back('q');
    return tokens;
  };
  // Two victims with one head at once: the first's copy of "aaaa" is cached, and the second's "xxxx" after it.
  Sequence* first = fixture.AddPrompt(1, prompt('a', 'y'));
  Sequence* victim = fixture.AddPrompt(2, prompt('a', 'x'));
  fixture.Step();
  // The first leaves; taking every free block evicts its "aaaa" (the victim holds its own copy, and "xxxx").
  fixture.scheduler().Remove(first);
  std::vector<int32_t> all_free;
  REQUIRE(fixture.allocator().Allocate(fixture.allocator().num_free(), all_free));
  fixture.allocator().Release(all_free);
  // The attacker's "bbbb" is cached under the colliding hash.
  Sequence* attacker = fixture.AddPrompt(3, prompt('b', 'r'));
  fixture.Step();
  CHECK(attacker->num_cached_prompt_tokens == 0);
  fixture.scheduler().Remove(victim);  // "xxxx" stays cached, free
  // "bbbb" then "xxxx": the head is the attacker's own block, and the victim's "xxxx" is not taken after it.
  Sequence* probe = fixture.AddPrompt(4, prompt('b', 'x'));
  SchedulerOutput plan = fixture.Step();
  CHECK(probe->num_cached_prompt_tokens == 4);
  CHECK(TokensFor(plan, probe) == 5);
}

TEST_CASE("scheduler: with prefix caching a prompt computed twice at once caches its tail after the shared head",
          "[unit][engine]") {
  SchedulerFixture fixture(/*num_blocks=*/64, {/*block_size=*/4, /*max_num_batched_tokens=*/64, /*max_running=*/8,
                                               /*enable_prefix_caching=*/true});
  // Two prompts with one head, admitted in one step: both compute it, the first's copy is cached.
  std::vector<int32_t> first(9, 'a'), second(9, 'a');
  for (int t = 4; t < 8; ++t) second[t] = 'c';
  fixture.AddPrompt(1, first);
  Sequence* computed = fixture.AddPrompt(2, second);
  fixture.Step();
  // The second's own second block is cached after the first's copy of the head.
  Sequence* again = fixture.AddPrompt(3, second);
  fixture.Step();
  CHECK(again->num_cached_prompt_tokens == 8);
  CHECK(again->block_table[1] == computed->block_table[1]);
}

TEST_CASE("scheduler: with prefix caching the later choices share the prompt choice 0 computed", "[unit][engine]") {
  SchedulerFixture fixture(/*num_blocks=*/64, {/*block_size=*/4, /*max_num_batched_tokens=*/64, /*max_running=*/8,
                                               /*enable_prefix_caching=*/true});
  const std::vector<Sequence*> choices = fixture.AddGroup(1, 22, /*n=*/4, std::nullopt);
  SchedulerOutput first = fixture.Step();
  CHECK(TokensFor(first, choices[0]) == 22);
  CHECK(first.block_copies.empty());
  const std::vector<int32_t> prompt_blocks = choices[0]->block_table;  // 5 full blocks and 2 tokens in a 6th
  REQUIRE(prompt_blocks.size() == 6);

  // The later choices share all 6 blocks and compute only the last prompt token, each in its own copy of
  // the partial block (choice 0 writes its first output token there in place).
  SchedulerOutput second = fixture.Step();
  for (size_t c = 1; c < choices.size(); ++c) {
    CHECK(TokensFor(second, choices[c]) == 1);
    CHECK(choices[c]->num_cached_prompt_tokens == 21);
    for (int k = 0; k < 5; ++k) CHECK(choices[c]->block_table[k] == prompt_blocks[k]);
    CHECK(choices[c]->block_table[5] != prompt_blocks[5]);
  }
  CHECK(choices[0]->block_table[5] == prompt_blocks[5]);
  REQUIRE(second.block_copies.size() == 3);
  for (const auto& [from, to] : second.block_copies) CHECK(from == prompt_blocks[5]);
  CHECK(second.num_prefill_tokens == 0);
  // 6 blocks of the prompt and 3 copies.
  CHECK(fixture.allocator().num_used() == 9);
  for (int k = 0; k < 5; ++k) CHECK(fixture.allocator().ref_count(prompt_blocks[k]) == 4);
  CHECK(fixture.allocator().ref_count(prompt_blocks[5]) == 1);

  // From then on each writes to its own blocks: no more copies.
  for (int step = 0; step < 4; ++step) CHECK(fixture.Step().block_copies.empty());
  CHECK(choices[0]->num_output() == 6);
  for (size_t c = 1; c < choices.size(); ++c) CHECK(choices[c]->num_output() == 5);
}

TEST_CASE("scheduler: a choice writing into a block shared with another copies it first", "[unit][engine]") {
  // A prompt ending on a block boundary: the later choice recomputes the last token, inside a full block
  // choice 0 holds (and the cache keeps).
  SchedulerFixture fixture(/*num_blocks=*/8, {/*block_size=*/4, /*max_num_batched_tokens=*/64, /*max_running=*/8,
                                              /*enable_prefix_caching=*/true});
  const std::vector<Sequence*> choices = fixture.AddGroup(1, 8, /*n=*/2, std::nullopt);
  fixture.Step();
  const std::vector<int32_t> prompt_blocks = choices[0]->block_table;
  REQUIRE(prompt_blocks.size() == 2);
  SchedulerOutput plan = fixture.Step();
  CHECK(TokensFor(plan, choices[1]) == 1);
  REQUIRE(plan.block_copies.size() == 1);
  CHECK(plan.block_copies[0].first == prompt_blocks[1]);
  CHECK(choices[1]->block_table[0] == prompt_blocks[0]);
  CHECK(choices[1]->block_table[1] == plan.block_copies[0].second);
  // Choice 0's token 8 went into a new block of its own; choice 1's goes into one next step.
  CHECK(choices[0]->block_table.size() == 3);
  CHECK(fixture.allocator().num_used() == 4);

  // A choice that ends gives its references back; the shared blocks stay with the other.
  fixture.scheduler().Remove(choices[1]);
  CHECK(fixture.allocator().ref_count(prompt_blocks[0]) == 1);
  CHECK(fixture.allocator().num_used() == 3);
}

TEST_CASE("scheduler: choices waiting for choice 0 keep their running places from later requests", "[unit][engine]") {
  SchedulerFixture fixture(/*num_blocks=*/64, {/*block_size=*/4, /*max_num_batched_tokens=*/64, /*max_running=*/3,
                                               /*enable_prefix_caching=*/true});
  const std::vector<Sequence*> choices = fixture.AddGroup(1, 22, /*n=*/3, std::nullopt);
  Sequence* later = fixture.Add(2, 10);
  SchedulerOutput plan = fixture.Step();
  CHECK(TokensFor(plan, choices[0]) == 22);
  CHECK(TokensFor(plan, later) == 0);  // the two places left belong to choices 1 and 2
  plan = fixture.Step();
  CHECK(TokensFor(plan, choices[1]) == 1);
  CHECK(TokensFor(plan, choices[2]) == 1);
  CHECK(TokensFor(plan, later) == 0);
  // A one-token prompt has nothing to share: its choices do not wait.
  SchedulerFixture short_fixture(64, {4, 64, 8, true});
  const std::vector<Sequence*> short_choices = short_fixture.AddGroup(1, 1, /*n=*/2, std::nullopt);
  plan = short_fixture.Step();
  CHECK(TokensFor(plan, short_choices[0]) == 1);
  CHECK(TokensFor(plan, short_choices[1]) == 1);
}

}  // namespace
}  // namespace llmc::engine
