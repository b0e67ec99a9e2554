-- leave.lua: a fair waiter gives up its place in the queue.
--
-- KEYS[1]  the lock key, P{N}
-- KEYS[2]  the fair queue, P{N}:queue
-- KEYS[3]  the queue's expiries, P{N}:queue:expiry
-- ARGV[1]  the waiter's token
-- ARGV[2]  the name's release channel, P{N}:released
-- ARGV[3]  'z' when the waiter wants a semaphore's permit; absent otherwise
--
-- Returns  1 when the waiter was at the head of the queue and the name is
--            free: the next waiter is told, on ARGV[2], that its turn came;
--            also when a semaphore's waiter leaves from anywhere in the
--            queue: a permit kept for those ahead may go to one behind;
--          0 otherwise.
local rank = redis.call('ZRANK', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[3] == 'z' and rank then
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
if rank == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
