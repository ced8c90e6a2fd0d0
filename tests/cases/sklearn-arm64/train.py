print('fit')
