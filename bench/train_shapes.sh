# Sourced by the training benchmarks (train_bench.sh, dtype_pair_bench.sh, the checkpoint
# benchmarks): their model shapes, defined once so that every benchmark of a shape trains the same
# model, and the overrides of a timed run.
#   tiny: vocab 256, dim 128, 4 layers, 4 heads, ffn 344, seq 128, batch 8, tied head
#   124m: vocab 50257, dim 768, 12 layers, 12 heads, ffn 2048, seq 256, batch 2, untied head

# train_shape SHAPE: sets warm (warm-up steps before the timed ones), h2_model (`h2 train` --set
# overrides of configs/train/tiny.yaml) and peer_model (bench/train_peer_torch.py's options).
train_shape() {
  case $1 in
    tiny)
      warm=5
      h2_model=(--set model.vocab_size=256 --set model.dim=128 --set model.n_layers=4
        --set model.n_heads=4 --set model.n_kv_heads=4 --set model.ffn_dim=344
        --set model.seq_len=128 --set model.tie_embeddings=true --set train.batch_size=8)
      peer_model=(--vocab-size 256 --dim 128 --n-layers 4 --n-heads 4 --ffn-dim 344
        --seq-len 128 --batch-size 8) ;;
    124m)
      warm=2
      h2_model=(--set model.vocab_size=50257 --set model.dim=768 --set model.n_layers=12
        --set model.n_heads=12 --set model.n_kv_heads=12 --set model.ffn_dim=2048
        --set model.seq_len=256 --set model.tie_embeddings=false --set train.batch_size=2)
      peer_model=(--vocab-size 50257 --dim 768 --n-layers 12 --n-heads 12 --ffn-dim 2048
        --seq-len 256 --batch-size 2 --untied) ;;
    *) echo "unknown shape $1 (tiny or 124m)" >&2; exit 2 ;;
  esac
}

# A timed run's `h2 train` overrides: one micro-batch a step, no evaluation, no checkpoints, the
# metrics of every step.
h2_timed=(--set train.grad_accum=1 --set train.eval_every=0 --set checkpoint.dir= --set log.every=1)
