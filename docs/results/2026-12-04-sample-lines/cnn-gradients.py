import torch, torch.nn as nn, numpy as np, sys
torch.set_num_threads(1)
torch.manual_seed(0)
def block(i, o): return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
net = nn.Sequential(*block(3, 32), *block(32, 64), nn.MaxPool2d(2), *block(64, 128), *block(128, 128), nn.MaxPool2d(2),
                    *block(128, 256), *block(256, 256), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))
print(sum(p.numel() for p in net.parameters()), file=sys.stderr)
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
x0 = torch.randn(64, 3, 32, 32); y0 = torch.randint(0, 10, (64,))
out = []
for step in range(40):
    x = x0 + 0.3 * torch.randn_like(x0)
    opt.zero_grad(); loss = nn.functional.cross_entropy(net(x), y0); loss.backward()
    if step % 2 == 1:
        out.append(torch.cat([p.grad.flatten() for p in net.parameters()]).numpy().astype(np.float32))
    opt.step()
np.stack(out).tofile('/tmp/abc/grads.f32')
print(len(out), out[0].size, file=sys.stderr)
