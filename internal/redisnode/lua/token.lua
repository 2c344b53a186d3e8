-- Shared by the scripts that issue fencing tokens; prepended to them. Such
-- a script takes the argument guard, last: "grain:maxttl" or
-- "grain:maxttl:durable", the token grain in µs, the restart guard's
-- maximum lease length in ms (0: no guard) and whether the servers persist
-- every write (see issue), which it hands to issue. One argument, not two: a server refuses a
-- command of more than 10 parts from a client that has not authenticated
-- with a protocol error, which would hide its NOAUTH.
--
-- clock returns the server's time in µs and in ms. µs since 1970 are about
-- 1.8e15 and stay below 2^53, so Lua's doubles hold them, and every token,
-- exactly.
local function clock()
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  return us, math.floor(us / 1000)
end

-- WAITED, ENLISTED, WRITER, COUNTER_LIFE and mint are in prelude.lua.

-- waited reports whether the lease value v is marked as waited for, by
-- anyone (WAITED) or by enlisted clients alone (ENLISTED).
local function waited(v)
  return string.sub(v, -#WAITED) == WAITED or string.sub(v, -#ENLISTED) == ENLISTED
end

-- refused is the reply of an attempt refused by the lease on lock, whose
-- value is v: minus its remaining TTL in ms, at least 1 (a lease in its
-- last millisecond is a retry soon, not an unknown wait), or 0 for a key
-- without a TTL. It marks the lease as waited for: with mark, ENLISTED
-- for a plain attempt (see acquire.lua), or WAITED, which an attempt of
-- any other kind puts in place of ENLISTED, so that the release looks for
-- fair waiters too.
local function refused(lock, v, mark)
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then
    return 0
  end
  mark = mark or WAITED
  if mark == WAITED and string.sub(v, -#ENLISTED) == ENLISTED then
    redis.call('SET', lock, string.sub(v, 1, -#ENLISTED - 1) .. WAITED, 'KEEPTTL')
  elseif not waited(v) then
    redis.call('SET', lock, v .. mark, 'KEEPTTL')
  end
  return -math.max(1, pttl)
end

-- NO_INFO begins the error of a script whose restart guard may not read
-- INFO (redisnode.BlindGuard recognises it).
local NO_INFO = 'ERR distlock: the restart guard cannot read INFO server'

-- lease_token, receipt_token and the counter's own value are the tokens
-- the records of a lock keep: a lease (holder LF token LF ...), the free
-- record a release leaves in its place (LF call LF token, see free_record
-- in prelude.lua) and the counter. lease_text is a lease's token as
-- decimal text, as it is written back.
local function lease_text(v)
  return v and string.match(v, '^[^\n]*\n(%d+)')
end

local function lease_token(v)
  return v and tonumber(lease_text(v))
end

local function receipt_token(r)
  return r and tonumber(string.match(r, '\n(%d+)$'))
end

-- highest returns the largest of a, b and c that are not nil, or nil.
local function highest(a, b, c)
  local m = a
  if b and (not m or b > m) then m = b end
  if c and (not m or c > m) then m = c end
  return m
end

-- records reads, in one command (unless r is its reply already), what the
-- lock whose key is lock and whose counter is counter keeps: the lease on
-- it (or nil: free), the last token issued as far as the records tell (or
-- nil: none left), whether no reader or permit can have been granted
-- since the last lease ended (quiet), and the free record (or nil). Quiet:
-- the free record that lease's release left is there and the counter,
-- which every grant of a reader or permit raises past it for longer than
-- the free record lives, is not above it. (An eviction of the counter
-- alone can fool this, as evictions can take the lock key itself: see the
-- eviction policy in the package documentation.)
local function records(lock, counter, r)
  r = r or redis.call('MGET', lock, counter)
  local v, free = r[1] or nil, nil
  if v and is_free(v) then
    v, free = nil, v
  end
  local rtok, fence = receipt_token(free), r[2] and tonumber(r[2]) or nil
  local quiet = rtok ~= nil and (fence == nil or fence <= rtok)
  return v, highest(lease_token(v), rtok, fence), quiet, free
end

-- loads_back reports whether the server keeps an append-only file, which
-- it loads on start in place of any snapshot.
local function loads_back()
  return string.find(redis.call('INFO', 'persistence'), 'aof_enabled:1', 1, true) ~= nil
end

-- issue returns the next fencing token after last (the largest token the
-- lock's records keep, or nil when they keep none), under the settings
-- guard ("grain:maxttl", see above), as a number and as decimal text
-- (Lua's own conversion keeps only 14 digits); or nil and the ms to wait
-- while the restart guard holds grants back.
--
-- The token is max(last + 1, now rounded down to the grain): records that
-- were lost (restart, flush, eviction, failover to a lagging replica)
-- resume above every token issued before the loss, as long as the
-- server's clock has not gone back by more than the loss took. A token
-- must be kept until the floor has passed it, which loses nothing: the
-- floor then gives a higher one. The token of a lease (leased) that the
-- floor gave, of a grain of at most 1ms, is passed by the floor within a
-- grain, before the lease can end (a lease lasts at least 1ms after its
-- last write) and long before its free record does: the lease and the free record
-- keep it. Any other token, one that ran ahead of the floor (a burst of
-- grants, a written-back token, a clock set back) or of a coarser grain,
-- or a reader's or permit's, is written to counter too, which lasts for
-- counter_life. Without a clock floor (grain 0) the counter is written
-- always and never expires.
--
-- Records that keep no token are a key new to this node, one unused long
-- enough for them to expire, or one whose data the node lost. The guard
-- tells the last apart by the node's life: the marker holds the run id of
-- a life known not to follow a loss, written by a declaration that the
-- server is new, or by this function once the server has run for one
-- maximum lease length, after which no lease granted before its start can
-- be alive. Until then, a new key waits. uptime_in_seconds is the
-- difference of two whole-second clock readings, up to a second more than
-- the server has run: one second comes off it.
--
-- With durable servers (the user's word that every write is on disk before
-- its reply: appendonly yes, appendfsync always, and no restart from an
-- older copy), a marker of an earlier life proves that the data was loaded
-- back, and with it every record of every lease: such a life follows no
-- loss once the server confirms that it loads its append-only file. A
-- server without a marker (brand-new, or restarted without its files)
-- still waits.
local function issue(counter, marker, us, guard, last, leased)
  local g, m, d = string.match(guard, '^(%d+):(%d+):?(%d*)$')
  local grain, maxttl = tonumber(g), tonumber(m)
  if not last and maxttl > 0 then
    local info = redis.pcall('INFO', 'server')
    if type(info) == 'table' and info.err then
      -- An ACL that forbids INFO: nothing is written, the script fails.
      error({err = NO_INFO .. ' (' .. info.err .. ')'})
    end
    local life = string.match(info, 'run_id:(%w+)')
    local seen = redis.call('GET', marker)
    if seen ~= life then
      if not (seen and d == '1' and loads_back()) then
        local up = (tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) - 1) * 1000
        if up < maxttl then
          return nil, maxttl - up
        end
      end
      redis.call('SET', marker, life)
    end
  end
  return mint(counter, us, grain, last or 0, leased)
end

-- lease returns the value of a lease of holder (an owner, or a re-entrant
-- lease's mark) with token text, granted at since (server ms, and the
-- receipt it carries, see carry in prelude.lua), described by desc; marked
-- as waited for with mark (WAITED or ENLISTED) when others wait.
local function lease(holder, text, since, desc, mark)
  local v = holder .. '\n' .. text .. '\n' .. since .. '\n' .. desc
  if mark then
    return v .. mark
  end
  return v
end

-- guard_refusal is the reply of an attempt that the restart guard held
-- back for ms more: "guard MS", told apart from a holder's refusal.
local function guard_refusal(ms)
  return 'guard ' .. string.format('%.0f', math.max(1, ms))
end

-- take writes a new lease on lock, free (its free record free, or nil),
-- for head (an owner, or a re-entrant lease's mark) with the description
-- desc and a TTL of ttl ms, marked with mark (see lease) when others
-- wait, and returns its token, the next after last (see issue); or, while
-- the restart guard (marker) holds grants back, its refusal (see
-- guard_refusal).
local function take(lock, counter, marker, head, desc, ttl, guard, last, free, mark)
  local us, since = clock()
  local fence, text = issue(counter, marker, us, guard, last, true)
  if not fence then
    return guard_refusal(text)
  end
  redis.call('SET', lock, lease(head, text, since .. carry(free), desc, mark), 'PX', ttl)
  return fence
end
