set terminal pngcairo size 1000,600 noenhanced font ',10'
set output 'accuracy-wide-virtual.png'
set title 'Fashion-MNIST, wide network (cfg/fmnist-wide.cfg), 16 ranks, virtual time, 1gbit links, 50 us latency'
set xlabel 'training time (s)'
set ylabel 'held-out top-1'
set key outside right
set grid
plot 'acc-wide-virtual-bsp.dat' using 2:3 with linespoints title 'BSP', 'acc-wide-virtual-fedavg-4.dat' using 2:3 with linespoints title 'FedAvg every 4 (Darknets multi-GPU scheme)', 'acc-wide-virtual-selsync-0.3.dat' using 2:3 with linespoints title 'SelSync δ=0.3', 'acc-wide-virtual-selsync-0.5.dat' using 2:3 with linespoints title 'SelSync δ=0.5'
