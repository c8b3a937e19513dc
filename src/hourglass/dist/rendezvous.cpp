#include "hourglass/dist/rendezvous.h"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "hourglass/base/error.h"

namespace hg {

namespace {

using Clock = std::chrono::steady_clock;

constexpr char kMagic[4] = {'H', 'G', 'R', 'V'};
// The largest payload accepted (a NCCL unique id is 128 bytes).
constexpr uint32_t kMaxPayload = 1 << 20;

// Closes the socket when it goes out of scope.
struct Socket {
  int fd = -1;
  explicit Socket(int f = -1) : fd(f) {}
  Socket(Socket&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

std::string address(const RendezvousOptions& o) {
  return fmt::format("{}:{}", o.master_addr, o.master_port);
}

std::string timeout_text(const RendezvousOptions& o) {
  return fmt::format("{:.3g} s", std::chrono::duration<double>(o.timeout).count());
}

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return int(std::clamp<int64_t>(left.count(), 0, INT32_MAX));
}

// Waits until `fd` is ready for `events`; false at the deadline.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, ms_left(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Reads or writes exactly `n` bytes before the deadline; false on timeout, error or EOF.
bool read_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_ready(fd, POLLIN, deadline)) return false;
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!wait_ready(fd, POLLOUT, deadline)) return false;
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

const std::string kCheck =
    "check that every rank has the same MASTER_ADDR, MASTER_PORT and world size, that rank 0 "
    "is running and that the port is reachable from every host (firewall)";

std::vector<uint8_t> serve(const RendezvousOptions& o, const std::vector<uint8_t>& payload) {
  HG_ASSERT(payload.size() <= kMaxPayload, "rendezvous payload of {} bytes", payload.size());
  const auto deadline = Clock::now() + o.timeout;
  Socket listener(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  bool v6 = listener.fd >= 0;
  if (!v6) listener = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.fd < 0)
    throw_runtime(fmt::format("rendezvous: socket() failed: {}", strerror(errno)));
  const int one = 1;
  const int zero = 0;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (v6) {
    // Both IPv6 and IPv4 peers (an IPv4 address arrives mapped).
    ::setsockopt(listener.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(uint16_t(o.master_port));
    rc = ::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(uint16_t(o.master_port));
    rc = ::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  if (rc != 0 || ::listen(listener.fd, 128) != 0) {
    throw_invalid(fmt::format("rendezvous: rank 0 cannot listen on MASTER_PORT={}: {}",
                              o.master_port, strerror(errno)),
                  "set MASTER_PORT to a free port on rank 0's host on every rank (`ss -ltn` "
                  "lists the ports in use)");
  }
  std::vector<bool> arrived(size_t(o.world_size), false);
  arrived[0] = true;
  int missing = o.world_size - 1;
  std::vector<Socket> peers;
  auto missing_ranks = [&] {
    std::vector<int> m;
    for (int r = 0; r < o.world_size; ++r)
      if (!arrived[size_t(r)]) m.push_back(r);
    return fmt::format("{}", fmt::join(m, ", "));
  };
  while (missing > 0) {
    if (!wait_ready(listener.fd, POLLIN, deadline)) {
      throw_runtime(
          fmt::format("rendezvous: rank 0 listening on port {} waited {} and {} of {} "
                      "ranks did not connect (missing ranks: {})",
                      o.master_port, timeout_text(o), missing, o.world_size, missing_ranks()),
          kCheck);
    }
    Socket peer(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (peer.fd < 0) continue;
    uint8_t hello[12];
    // A connection that says nothing valid (a port scanner, a stale client) is dropped; one
    // that says something inconsistent fails the job.
    if (!read_all(peer.fd, hello, sizeof(hello), deadline) ||
        std::memcmp(hello, kMagic, sizeof(kMagic)) != 0)
      continue;
    const uint32_t rank = get_u32(hello + 4);
    const uint32_t world = get_u32(hello + 8);
    if (world != uint32_t(o.world_size)) {
      throw_runtime(fmt::format("rendezvous: rank {} says the world size is {}, rank 0 says {}",
                                rank, world, o.world_size),
                    kCheck);
    }
    if (rank == 0 || rank >= world || arrived[rank]) {
      throw_runtime(
          fmt::format("rendezvous: a second process says it is rank {} of {}", rank, world),
          "give every process its own rank (RANK 0..WORLD_SIZE-1)");
    }
    arrived[rank] = true;
    --missing;
    peers.push_back(std::move(peer));
  }
  std::vector<uint8_t> message;
  put_u32(message, uint32_t(payload.size()));
  message.insert(message.end(), payload.begin(), payload.end());
  for (const Socket& peer : peers) {
    if (!write_all(peer.fd, message.data(), message.size(), deadline)) {
      throw_runtime("rendezvous: rank 0 could not send to a rank that had connected", kCheck);
    }
  }
  return payload;
}

std::vector<uint8_t> join(const RendezvousOptions& o) {
  const auto deadline = Clock::now() + o.timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(o.master_port);
  if (const int rc = ::getaddrinfo(o.master_addr.c_str(), port.c_str(), &hints, &found); rc != 0) {
    throw_invalid(fmt::format("rendezvous: MASTER_ADDR={} does not resolve: {}", o.master_addr,
                              gai_strerror(rc)),
                  "set MASTER_ADDR to rank 0's host name or address, the same on every rank");
  }
  std::string last_error = "no address";
  // Rank 0 may not listen yet: connect is retried until the deadline, with a growing pause.
  auto pause = std::chrono::milliseconds(10);
  while (true) {
    for (addrinfo* a = found; a; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (s.fd < 0) continue;
      if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
        last_error = strerror(errno);
        continue;
      }
      const int one = 1;
      ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::vector<uint8_t> hello(kMagic, kMagic + 4);
      put_u32(hello, uint32_t(o.rank));
      put_u32(hello, uint32_t(o.world_size));
      uint8_t length[4];
      if (!write_all(s.fd, hello.data(), hello.size(), deadline) ||
          !read_all(s.fd, length, sizeof(length), deadline)) {
        ::freeaddrinfo(found);
        throw_runtime(fmt::format("rendezvous: rank {} connected to rank 0 at {} but got no "
                                  "answer within {} (rank 0 waits for every rank first)",
                                  o.rank, address(o), timeout_text(o)),
                      kCheck);
      }
      const uint32_t n = get_u32(length);
      std::vector<uint8_t> payload(n);
      if (n > kMaxPayload || !read_all(s.fd, payload.data(), n, deadline)) {
        ::freeaddrinfo(found);
        throw_runtime(
            fmt::format("rendezvous: rank {} got a broken answer from {}", o.rank, address(o)),
            kCheck);
      }
      ::freeaddrinfo(found);
      return payload;
    }
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  ::freeaddrinfo(found);
  throw_runtime(fmt::format("rendezvous: rank {} could not connect to rank 0 at {} within {} "
                            "({})",
                            o.rank, address(o), timeout_text(o), last_error),
                kCheck);
}

}  // namespace

std::vector<uint8_t> rendezvous_broadcast(const RendezvousOptions& options,
                                          const std::vector<uint8_t>& payload) {
  HG_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size,
           "rendezvous: rank {} of world size {} is not a rank", options.rank, options.world_size);
  if (options.world_size == 1) return payload;
  HG_CHECK(options.master_port >= 1 && options.master_port <= 65535,
           "rendezvous: MASTER_PORT={} is outside 1..65535 (set MASTER_PORT on every rank)",
           options.master_port);
  HG_CHECK(!options.master_addr.empty(),
           "rendezvous: rank {} of {} has no MASTER_ADDR to find rank 0 at (set MASTER_ADDR and "
           "MASTER_PORT on every rank; torchrun and hourglass launch set them)",
           options.rank, options.world_size);
  return options.rank == 0 ? serve(options, payload) : join(options);
}

}  // namespace hg
