#include "train/distributed/agreement.h"

#include <algorithm>
#include <vector>

namespace lathe::dist {

void on_every_rank(Communicator& comm, const std::function<void()>& fn,
                   const std::function<int(const std::exception&)>& exit_code_of) {
  // "" when this rank succeeded, else "<exit code> <message>".
  std::string mine;
  try {
    fn();
  } catch (const CollectiveError& e) {
    mine = std::to_string(e.exit_code) + " " + e.what();
  } catch (const std::exception& e) {
    mine = std::to_string(exit_code_of ? exit_code_of(e) : 1) + " " + e.what();
  }
  const std::vector<std::string> all = comm.all_gather(mine);
  const auto failed = std::find_if(all.begin(), all.end(), [](const std::string& s) { return !s.empty(); });
  if (failed == all.end()) return;
  const size_t space = failed->find(' ');
  const int exit_code = std::stoi(failed->substr(0, space));
  std::string message = failed->substr(space + 1);
  const bool everywhere = std::all_of(all.begin(), all.end(), [&](const std::string& s) { return s == *failed; });
  if (!everywhere) message = "rank " + std::to_string(failed - all.begin()) + " of " + std::to_string(all.size()) + ": " + message;
  throw CollectiveError(message, exit_code, comm.rank() == 0);
}

void check_same_run(Communicator& comm, const nlohmann::json& options, const std::string& data) {
  if (comm.size() == 1) return;
  const std::vector<std::string> all = comm.all_gather(nlohmann::json{{"options", options}, {"data", data}}.dump());
  const nlohmann::json first = nlohmann::json::parse(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    const nlohmann::json other = nlohmann::json::parse(all[r]);
    std::string what;
    for (const auto& [key, value] : first["options"].items()) {
      const auto it = other["options"].find(key);
      if (it == other["options"].end() || *it != value) {
        std::string flag = "--" + key;  // the JSON key of the flag: --min-lr is min_lr
        std::replace(flag.begin(), flag.end(), '_', '-');
        what = flag + " is " + value.dump() + " on rank 0 but " +
               (it == other["options"].end() ? std::string("absent") : it->dump()) + " on rank " + std::to_string(r);
        break;
      }
    }
    if (what.empty() && other["options"].size() != first["options"].size())
      what = "rank " + std::to_string(r) + " has options that rank 0 has not";
    if (what.empty() && other["data"] != first["data"])
      what = "the training data differ: rank 0 reads " + first["data"].get<std::string>() + ", rank " +
             std::to_string(r) + " reads " + other["data"].get<std::string>();
    if (!what.empty())
      throw CollectiveError("the " + std::to_string(all.size()) + " processes of the run were not started alike: " + what +
                                "; every rank must train the same run on the same data",
                            2, comm.rank() == 0);
  }
}

}  // namespace lathe::dist
