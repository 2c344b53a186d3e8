-- Shared by the scripts that grant a lock; prepended to them, after
-- token.lua. A key is used by one family of lock at a time while any
-- holding of it lives: a mutex (plain, fair or re-entrant: the lock key), a
-- read-write lock (its writer in the lock key, marked, and its readers
-- beside it) or a semaphore of n permits (beside it, with n kept in the
-- permits' token hash). A request of another family, or for a semaphore of
-- another n, is refused with mismatch's reply, before it changes anything.
-- A live holding of the request's own family proves the others absent, so
-- they are looked for only when the family holds nothing.
--
-- The keys of the other families are named from the fencing counter's
-- name, by the suffixes that Keys gives them, in the same hash slot. They
-- are not passed in KEYS: that would push the plain acquire past the ten
-- parts a server takes from a client that has not authenticated, and hide
-- its NOAUTH behind a protocol error.

-- WRITER, the last line of a writer's description, is in prelude.lua.

-- LIMIT is the field of the permits' token hash that holds n, under a name
-- no owner has.
local LIMIT = '\nlimit'

-- is_writer reports whether the lock value v is a read-write lock's writer.
local function is_writer(v)
  local tail = string.sub(v, -#WRITER - #WAITED)
  return string.sub(v, -#WRITER) == WRITER or tail == WRITER .. WAITED
end

-- siblings returns the lock key, the readers and the permits with their
-- token hash, of the lock whose fencing counter is counter.
local function siblings(counter)
  local base = string.sub(counter, 1, -7) -- without ':fence'
  return base, base .. ':readers', base .. ':permits', base .. ':tokens'
end

-- live reports whether the leases (a sorted set by expiry ms) hold one
-- that lasts past now.
local function live(leases, now)
  return redis.call('ZCOUNT', leases, '(' .. now, '+inf') > 0
end

-- mismatch is the reply that refuses a request of another family than
-- held ('mutex', 'rw' or 'permit', with the semaphore's n if known).
local function mismatch(held, n)
  if held == 'permit' and n then
    return 'kind permit ' .. n
  end
  return 'kind ' .. held
end

-- lock_family names the family of a lock key's holder, whose value is v.
local function lock_family(v)
  if is_writer(v) then
    return 'rw'
  end
  return 'mutex'
end

-- beside_lock returns the refusal of a lock-key request (a mutex, or with
-- rw a writer) on a key whose lock key is free but which readers (unless
-- rw) or permits hold, or nil.
local function beside_lock(counter, rw)
  local _, readers, permits, tokens = siblings(counter)
  if redis.call('EXISTS', readers, permits) == 0 then
    return nil
  end
  local _, now = clock()
  if not rw and live(readers, now) then
    return mismatch('rw')
  end
  if live(permits, now) then
    return mismatch('permit', redis.call('HGET', tokens, LIMIT))
  end
  return nil
end
