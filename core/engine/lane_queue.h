// LaneQueue: the FIFO of one lane (core/engine/lanes.h), a ring buffer that
// keeps its slots while the lane is in use.
//
// Why not std::deque: a KEY lane holds a handful of events that are pushed on
// the consumer's poll thread and popped on a gRPC thread. A deque frees a
// block whenever its front block empties and allocates one whenever its back
// block fills, so nearly every few events paid an allocation on one thread
// and a free on the other (tcmalloc's central free list in the KEY profile;
// bench/RESULTS.md). Here the slots stay allocated until the lane is empty
// and holds more than kKeptSlots of them, so a lane that stays small never
// allocates again and an idle lane that once grew gives its memory back.
//
// Threading: not thread-safe; the engine guards it.
#ifndef FERRY_CORE_ENGINE_LANE_QUEUE_H_
#define FERRY_CORE_ENGINE_LANE_QUEUE_H_

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace ferry {

template <typename Item>
class LaneQueue {
 public:
  // An empty lane keeps at most this many slots (a few KiB per lane).
  static constexpr size_t kKeptSlots = 16;

  LaneQueue() = default;
  LaneQueue(const LaneQueue&) = delete;
  LaneQueue& operator=(const LaneQueue&) = delete;
  LaneQueue(LaneQueue&& other) noexcept { Swap(other); }
  LaneQueue& operator=(LaneQueue&& other) noexcept {
    LaneQueue moved(std::move(other));
    Swap(moved);
    return *this;
  }
  ~LaneQueue() { Release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }

  // The item at `index` from the front (index < size()).
  Item& operator[](size_t index) { return slots_[Slot(index)]; }
  const Item& operator[](size_t index) const { return slots_[Slot(index)]; }
  Item& front() { return (*this)[0]; }
  const Item& front() const { return (*this)[0]; }

  void push_back(Item item) {
    if (size_ == capacity_) Grow();
    new (&slots_[Slot(size_)]) Item(std::move(item));
    ++size_;
  }
  void push_front(Item item) {
    if (size_ == capacity_) Grow();
    head_ = (head_ + capacity_ - 1) & (capacity_ - 1);
    new (&slots_[head_]) Item(std::move(item));
    ++size_;
  }
  // Inserts so that the new item ends up at `index` (index <= size()),
  // shifting the later items back by one.
  void insert(size_t index, Item item) {
    push_back(std::move(item));
    for (size_t at = size_ - 1; at > index; --at) {
      using std::swap;
      swap((*this)[at], (*this)[at - 1]);
    }
  }
  Item pop_front() {
    Item& slot = slots_[head_];
    Item item = std::move(slot);
    slot.~Item();
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
    if (size_ == 0) {
      head_ = 0;
      if (capacity_ > kKeptSlots) Release();
    }
    return item;
  }

  // Keeps the items for which `keep` is true, in order; hands the others to
  // `removed` in order.
  template <typename Keep, typename Removed>
  void Partition(const Keep& keep, const Removed& removed) {
    LaneQueue kept;
    while (!empty()) {
      Item item = pop_front();
      if (keep(item)) {
        kept.push_back(std::move(item));
      } else {
        removed(std::move(item));
      }
    }
    Swap(kept);
  }

 private:
  size_t Slot(size_t index) const { return (head_ + index) & (capacity_ - 1); }

  void Grow() {
    const size_t capacity = capacity_ == 0 ? 4 : capacity_ * 2;  // a power of two
    Item* slots = std::allocator<Item>().allocate(capacity);
    for (size_t index = 0; index < size_; ++index) {
      Item& from = (*this)[index];
      new (&slots[index]) Item(std::move(from));
      from.~Item();
    }
    if (slots_ != nullptr) std::allocator<Item>().deallocate(slots_, capacity_);
    slots_ = slots;
    capacity_ = capacity;
    head_ = 0;
  }
  // Destroys the items and frees the slots.
  void Release() {
    for (size_t index = 0; index < size_; ++index) (*this)[index].~Item();
    if (slots_ != nullptr) std::allocator<Item>().deallocate(slots_, capacity_);
    slots_ = nullptr;
    capacity_ = 0;
    head_ = 0;
    size_ = 0;
  }
  void Swap(LaneQueue& other) noexcept {
    std::swap(slots_, other.slots_);
    std::swap(capacity_, other.capacity_);
    std::swap(head_, other.head_);
    std::swap(size_, other.size_);
  }

  Item* slots_ = nullptr;
  size_t capacity_ = 0;  // 0 or a power of two
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_LANE_QUEUE_H_
