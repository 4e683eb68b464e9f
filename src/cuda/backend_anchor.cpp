// Keeps the kforge_cuda library non-empty while its first real sources land.
namespace kf::cuda::detail {
int backend_anchor = 0;
}
