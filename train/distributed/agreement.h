// The ranks of a run agree before they go on: on failures (one rank cannot start, so none does),
// and on what they train (the same options and the same data), so that a mistake is one clear
// error printed once, and no rank waits forever in a collective that another never reaches.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "train/distributed/communicator.h"

namespace lathe::dist {

// An error that every rank of the run raised with the same message at the same point. Only rank 0
// prints it (print_here); every rank exits with exit_code.
struct CollectiveError : Error {
  CollectiveError(const std::string& what, int exit_code, bool print_here)
      : Error(what), exit_code(exit_code), print_here(print_here) {}
  int exit_code;
  bool print_here;
};

// Runs `fn` on every rank, then agrees: when it threw on any rank, every rank throws a
// CollectiveError with the message of the lowest rank that failed (prefixed "rank R: " unless
// every rank failed with that message) and the exit code `exit_code_of` gives for that error
// (default 1). A CollectiveError thrown by `fn` keeps its exit code. Single process: the error is
// re-thrown as a CollectiveError the same way.
void on_every_rank(Communicator& comm, const std::function<void()>& fn,
                   const std::function<int(const std::exception&)>& exit_code_of = {});

// Every rank throws a CollectiveError (exit code 2) when the ranks were given different options or
// read different data; the message names the first option that differs by its flag (with both
// values) or the data, and the ranks. `options`: the run's options as JSON, keyed as TrainOptions'
// JSON (train::Trainer::applied_options: defaults resolved, so the values are the ones trained
// with); `data`: the line of data::Dataset::fingerprint (a byte corpus by its size and the
// checksum of all its bytes; token shards by their token count, their tokenizer's checksum and
// their description).
void check_same_run(Communicator& comm, const nlohmann::json& options, const std::string& data);

}  // namespace lathe::dist
