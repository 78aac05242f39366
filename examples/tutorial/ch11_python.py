"""Chapter 11 of the tutorial (docs/tutorial/11-python.md): chapters 1 to 9's path in Python, through
`import lathe`, the C++ library itself. Run: PYTHONPATH=build/python python3 examples/tutorial/ch11_python.py"""
import os
import tempfile

import numpy as np

import lathe

HERE = os.path.dirname(os.path.abspath(__file__))
print("=== tensors ===")
# [tutorial:tensors]
a = np.arange(6, dtype=np.float32).reshape(2, 3)
t = lathe.from_numpy(a)  # no copy: t is a view of a's memory
t[1].fill_(-1.0)         # a lathe op writes...
print(a)                 # ...and NumPy sees it
print(t.desc(), t.strides, t.T.is_contiguous())
s = t.to("sim").to("bf16")  # the emulated accelerator, in bf16
print(s.desc(), (s * 2).cpu().tolist())
# [/tutorial:tensors]

print("=== autograd ===")
# [tutorial:autograd]
x = lathe.tensor([0.5, -1.0, 2.0], dtype="f64", requires_grad=True)
y = (lathe.tanh(x) * x).sum()  # d/dx x tanh(x) = tanh(x) + x (1 - tanh(x)^2)
y.backward()
want = np.tanh([0.5, -1.0, 2.0]) + np.array([0.5, -1.0, 2.0]) * (1 - np.tanh([0.5, -1.0, 2.0]) ** 2)
print(y.grad_fn, x.grad.tolist())
print("max |lathe - by hand|:", np.abs(np.asarray(x.grad) - want).max())
# [/tutorial:autograd]

print("=== op ===")
# [tutorial:op]
def my_softmax(z, dim):  # from lathe's ops: autograd derives its backward
    e = lathe.exp(z - z.max(dim=dim, keepdim=True).detach())
    return e / e.sum(dim=dim, keepdim=True)

z = lathe.randn((4, 7), seed=3, dtype=lathe.f64).requires_grad_()
w = lathe.randn((4, 7), seed=4, dtype=lathe.f64)
(my_softmax(z, 1) * w).sum().backward()
mine = z.grad.clone()
z.grad = None
(lathe.softmax(z, dim=1) * w).sum().backward()  # lathe's fused kernel and its own backward
print("forward equal to 1e-15:", np.allclose(np.asarray(my_softmax(z, 1).detach()),
                                             np.asarray(lathe.softmax(z, dim=1).detach()), rtol=1e-15, atol=0))
print("backward equal to 1e-15:", np.allclose(np.asarray(mine), np.asarray(z.grad), rtol=1e-15, atol=1e-17))
# [/tutorial:op]

print("=== gpt ===")
# [tutorial:gpt]
config = dict(lathe.gpt_config("tiny"), block_size=32, n_embd=32)
model = lathe.GPT(config, seed=1337)
model.to(lathe.f64)  # as chapter 5: the printed losses are then the same on every CPU
print(model.num_params(), "parameters;", list(model.named_parameters())[:3])
data = lathe.Dataset(os.path.join(HERE, "data", "workshop.txt"), block_size=32)
gen = lathe.Generator(seed=1)
x, y = data.sample("train", 8, gen)
logits, loss = model(x, y)
print(logits.desc(), "loss %.4f (uniform over 256 bytes: %.4f)" % (loss.item(), np.log(256)))
# [/tutorial:gpt]

print("=== training ===")
# [tutorial:training]
opt = lathe.optim.make("adamw", model.parameters(), lr=2e-3, weight_decay=0.1, betas=(0.9, 0.99))
for step in range(1, 61):
    x, y = data.sample("train", 8, gen)
    opt.zero_grad()
    loss = model.loss(x, y)
    loss.backward()
    opt.step()
    if step % 20 == 0:
        print("step %d loss %.4f" % (step, loss.item()))
# [/tutorial:training]

print("=== checkpoint ===")
# [tutorial:checkpoint]
path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
lathe.save_checkpoint(path, model, opt, step=60)
ckpt = lathe.Checkpoint(path, device="sim")  # the run continues on another device
resumed = lathe.GPT(ckpt.model_config, device="sim")
resumed.to(lathe.f64)
ropt = lathe.optim.make(ckpt.optimizer_kind, resumed.parameters(), lr=2e-3, weight_decay=0.1, betas=(0.9, 0.99))
ckpt.restore(resumed, ropt)
state = {e["name"]: e for e in ropt.state_entries()}
print("step", ckpt.step, "| exp_avg of param 0:", state["param.0.exp_avg"]["tensor"].desc(),
      state["param.0.exp_avg"]["placement"])
for m, o, dev in ((model, opt, "cpu"), (resumed, ropt, "sim")):
    batch = data.sample("train", 8, lathe.Generator(seed=7))
    o.zero_grad()
    m.loss(batch[0].to(dev), batch[1].to(dev)).backward()
    o.step()
print("one more step on both, weights equal bit for bit:",
      all(p.tolist() == resumed.named_parameters()[n].cpu().tolist() for n, p in model.named_parameters().items()))
# [/tutorial:checkpoint]

print("=== sampling ===")
# [tutorial:sampling]
tok = lathe.Tokenizer("bytes")
prompt = lathe.tensor([tok.encode("The lathe ")])
out = model.generate(prompt, 40, temperature=0.8, top_k=20, seed=1)
print(repr(tok.decode(out[0])))
# [/tutorial:sampling]

print("=== trainer ===")
# [tutorial:trainer]
seen = []
summary = lathe.train(data=os.path.join(HERE, "data", "workshop.txt"), config="tiny", steps=30, batch=8, lr=3e-3,
                      warmup=5, eval_interval=30, eval_iters=4, sample_tokens=0, threads=1,
                      out=tempfile.mkdtemp(), overwrite=True, quiet=True, on_step=seen.append)
print(len(seen), "steps; loss %.1f -> %.1f; validation %.1f nats" % (seen[0]["loss"], seen[-1]["loss"],
                                                                       summary["final_val_loss"]))
# [/tutorial:trainer]
