// The TCP rendezvous that hands NCCL's unique id to every rank, exercised between threads of
// this process: every rank gets rank 0's bytes whichever side starts first; a missing rank, an
// absent rank 0, an unresolvable address, a port in use and inconsistent ranks are errors
// naming what to fix. The timeouts only bound the failure cases; no result depends on timing.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "hourglass/base/error.h"
#include "hourglass/dist/rendezvous.h"
#include "support/expect_error.h"

namespace hg {
namespace {

using namespace std::chrono_literals;

// A socket bound to a port the kernel picked (listening when `listen` is set); closed at scope
// end.
struct Bound {
  int fd = -1;
  int port = 0;
  explicit Bound(bool listen) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    if (listen) EXPECT_EQ(::listen(fd, 1), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~Bound() { ::close(fd); }
};

int free_port() { return Bound(false).port; }

RendezvousOptions options(int port, int rank, int world, std::chrono::milliseconds timeout = 60s) {
  RendezvousOptions o;
  o.master_addr = "127.0.0.1";
  o.master_port = port;
  o.rank = rank;
  o.world_size = world;
  o.timeout = timeout;
  return o;
}

// Runs every rank in its own thread (the others first when `root_last`, so that they retry
// until rank 0 listens) and returns what each got.
std::vector<std::vector<uint8_t>> run_ranks(int world, bool root_last,
                                            const std::vector<uint8_t>& payload) {
  const int port = free_port();
  std::vector<std::future<std::vector<uint8_t>>> results(static_cast<size_t>(world));
  auto start = [&](int rank) {
    results[size_t(rank)] = std::async(std::launch::async, [=] {
      return rendezvous_broadcast(options(port, rank, world),
                                  rank == 0 ? payload : std::vector<uint8_t>{});
    });
  };
  if (!root_last) start(0);
  for (int r = 1; r < world; ++r) start(r);
  if (root_last) start(0);
  std::vector<std::vector<uint8_t>> got;
  for (auto& f : results) got.push_back(f.get());
  return got;
}

TEST(Rendezvous, EveryRankGetsRankZerosBytes) {
  std::vector<uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = uint8_t(i * 7 + 3);
  for (int world : {2, 4, 8})
    for (bool root_last : {false, true}) {
      const auto got = run_ranks(world, root_last, id);
      for (int r = 0; r < world; ++r)
        EXPECT_EQ(got[size_t(r)], id) << "rank " << r << " of " << world;
    }
  // One rank needs no address and no socket.
  RendezvousOptions alone;
  EXPECT_EQ(rendezvous_broadcast(alone, id), id);
}

TEST(Rendezvous, NoRankZeroNamesTheAddress) {
  const int port = free_port();  // nobody listens there
  try {
    rendezvous_broadcast(options(port, 1, 2, 300ms), {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    const std::string text = e.one_line();
    EXPECT_NE(text.find("rank 1 could not connect to rank 0 at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("MASTER_ADDR"), std::string::npos) << text;
  }
}

// Nobody joins rank 0: it gives up at its timeout naming the ranks that did not come.
TEST(Rendezvous, MissingRanksAreNamed) {
  try {
    rendezvous_broadcast(options(free_port(), 0, 3, 300ms), {1, 2, 3});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(e.one_line().find("2 of 3 ranks did not connect (missing ranks: 1, 2)"),
              std::string::npos)
        << e.one_line();
  }
}

TEST(Rendezvous, InconsistentRanksAreRefused) {
  const int port = free_port();
  auto root = std::async(std::launch::async,
                         [=] { return rendezvous_broadcast(options(port, 0, 2, 60s), {9}); });
  auto other = std::async(std::launch::async,
                          [=] { return rendezvous_broadcast(options(port, 1, 3, 60s), {}); });
  try {
    root.get();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.one_line().find("rank 1 says the world size is 3, rank 0 says 2"),
              std::string::npos)
        << e.one_line();
  }
  EXPECT_THROW(other.get(), Error);
}

TEST(Rendezvous, BadSettingsAreInvalidInput) {
  Bound busy(true);
  test::expect_invalid([&] { rendezvous_broadcast(options(busy.port, 0, 2), {1}); },
                       {"MASTER_PORT=" + std::to_string(busy.port), "free port"});
  RendezvousOptions o = options(free_port(), 1, 2, 1s);
  o.master_addr = "no-such-host.invalid";
  test::expect_invalid([&] { rendezvous_broadcast(o, {}); },
                       {"MASTER_ADDR=no-such-host.invalid does not resolve"});
  o.master_addr = "";
  test::expect_invalid([&] { rendezvous_broadcast(o, {}); }, {"no MASTER_ADDR"});
  test::expect_invalid([&] { rendezvous_broadcast(options(0, 1, 2), {}); }, {"MASTER_PORT=0"});
  test::expect_invalid([&] { rendezvous_broadcast(options(1, 2, 2), {}); },
                       {"rank 2 of world size 2"});
}

}  // namespace
}  // namespace hg
